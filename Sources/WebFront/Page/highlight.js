// Highlight: marks the loaded rows that also match the highlight expression, asked of the API page by page.

import { api, qs } from './api.js';
import { debounce } from './util.js';
import { S } from './store.js';
import { list } from './list.js';
import { showInputError } from './filter.js';
import { updateStatusbar } from './statusbar.js';

// Highlight. The API has one filter per query and no id-range operator, so the page
// asks for rows matching "(filter) & (highlight)" — newest first, 500 at a time — and
// marks the loaded rows whose ids come back. It keeps paging the highlight query only
// while its results are still inside the loaded range (so a long scroll stays marked),
// and re-asks for the newest 100 when live rows arrive. Limitation: a highlight match
// outside what those queries return (e.g. an in-flight row) is not marked.
function highlightQuery() {
  const f = S.filter.trim();
  const hq = S.highlight.trim();
  return { text: f ? '(' + f + ') & (' + hq + ')' : hq, offset: f ? ('(' + f + ') & (').length : 0 };
}

async function hlFetch(gen, before, limit) {
  const q = highlightQuery();
  let res;
  try {
    res = await api('GET', '/api/exchanges' + qs({ filter: q.text, before, limit }));
  } catch (e) {
    if (gen !== S.hlGen) return false;
    if (e.status === 400) {
      const p = e.data.position;
      showInputError('highlight', e.data.error || e.message, typeof p === 'number' && p > q.offset ? p - q.offset : null);
    }
    return false;
  }
  if (gen !== S.hlGen) return false;
  showInputError('highlight', null);
  const rows = res.exchanges || [];
  for (const r of rows) S.hl.add(r.id);
  if (before !== undefined || S.hlLast === null) {
    S.hlNext = res.next === undefined ? null : res.next;
    S.hlLast = rows.length ? rows[rows.length - 1].id : S.hlLast;
  }
  list.refresh(false);
  updateStatusbar();
  return true;
}

export async function refreshHighlight() {
  const gen = ++S.hlGen;
  S.hl = new Set();
  S.hlNext = null;
  S.hlLast = null;
  if (!S.highlight.trim()) {
    showInputError('highlight', null);
    list.refresh(false);
    updateStatusbar();
    return;
  }
  if (await hlFetch(gen, undefined, 500)) ensureHighlight();
}

export async function ensureHighlight() {
  if (S.hlBusy || !S.highlight.trim()) return;
  S.hlBusy = true;
  const gen = S.hlGen;
  try {
    for (let k = 0; k < 50 && gen === S.hlGen && S.hlNext !== null && S.hlLast !== null && S.ids.has(S.hlLast); k++) {
      if (!(await hlFetch(gen, S.hlNext, 500))) break;
    }
  } finally { S.hlBusy = false; }
}

export const highlightLive = debounce(() => { if (S.highlight.trim()) hlFetch(S.hlGen, undefined, 100); }, 700);
