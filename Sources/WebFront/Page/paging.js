// Loading the list from the API: the first page for a filter, older pages on scroll, and the catch-up after a reconnect.

import { toast } from './dom.js';
import { api, qs } from './api.js';
import { S, storedCount } from './store.js';
import { list, scrollEl, scrollToEnd, updateEmpty, updatePill } from './list.js';
import { showInputError } from './filter.js';
import { refreshHighlight, ensureHighlight } from './highlight.js';
import { sendFilter, onAdded } from './live.js';
import { updateStatusbar } from './statusbar.js';

const PAGE = 200;          // rows per keyset page

/** Replace the list with the first page for the current filter (one request). */
export async function reload() {
  const gen = ++S.gen;
  const f = S.filter;
  S.filterBad = false;
  sendFilter();
  S.loading = true;
  S.loadingFirst = true;
  updateEmpty();
  let res;
  try {
    res = await api('GET', '/api/exchanges' + qs({ filter: f, limit: PAGE }));
  } catch (e) {
    if (gen !== S.gen) return;
    S.loading = false;
    S.loadingFirst = false;
    if (e.status === 400) {
      showInputError('filter', e.data.error || e.message, e.data.position);
      emptyForBadFilter();
    } else toast('Could not load the list: ' + e.message, true);
    updateEmpty();
    return;
  }
  if (gen !== S.gen) return;
  showInputError('filter', null);
  const rows = res.exchanges || [];
  const pageIds = new Set(rows.map(r => r.id));
  // Rows the live feed delivered after this filter was sent, and newer than the page, stay.
  const top = rows.length ? rows[0].id : 0;
  S.head = S.head.filter(r => r._gen === gen && !pageIds.has(r.id) && r.id > top);
  S.body = rows;
  S.ids = new Map();
  for (const r of S.head) S.ids.set(r.id, r);
  for (const r of rows) { S.ids.set(r.id, r); S.maxId = Math.max(S.maxId, r.id); }
  S.next = res.next === undefined ? null : res.next;
  S.loading = false;
  S.loadingFirst = false;
  S.started = true;
  S.newCount = 0;
  if (S.newestFirst) scrollEl.scrollTop = 0;
  list.refresh(true);
  if (!S.newestFirst) scrollToEnd();
  refreshHighlight();
  updateStatusbar();
}

/** A filter the API refused selects nothing: the rows of the last good one would pass for its answer. */
export function emptyForBadFilter() {
  S.filterBad = true;
  S.head = []; S.body = []; S.ids = new Map(); S.next = null; S.newCount = 0;
  S.started = true;
  list.refresh(true);
  updatePill();
  updateStatusbar();
}

export async function loadMore() {
  if (S.loading || S.next === null) return;
  const gen = S.gen;
  S.loading = true;
  let res;
  try {
    res = await api('GET', '/api/exchanges' + qs({ filter: S.filter, before: S.next, limit: PAGE }));
  } catch (e) {
    if (gen === S.gen) {
      S.loading = false;
      toast('Could not load more rows: ' + e.message, true);
    }
    return;
  }
  if (gen !== S.gen) return;
  let added = 0;
  for (const r of res.exchanges || []) {
    if (S.ids.has(r.id)) continue;
    S.ids.set(r.id, r);
    S.body.push(r);
    added++;
  }
  S.next = res.next === undefined ? null : res.next;
  S.loading = false;
  // Oldest first shows older rows at the top: keep what the user looks at still.
  if (!S.newestFirst && added) list.shiftBy(added);
  list.refresh(false);
  ensureHighlight();
  updateStatusbar();
}

/** After a reconnect: fetch what the feed missed (no after= in the API: take the first page). */
export async function catchUp() {
  const gen = S.gen;
  let res;
  try { res = await api('GET', '/api/exchanges' + qs({ filter: S.filter, limit: 500 })); } catch (_) { return; }
  if (gen !== S.gen) return;
  const rows = res.exchanges || [];
  const fresh = [];
  let touched = false;
  for (const r of rows) {
    if (S.ids.has(r.id)) { touched = true; break; }
    fresh.push(r);
  }
  if (!touched && res.next !== null && storedCount()) { reload(); return; }   // missed more than a page
  onAdded(fresh.reverse());
}
