// The traffic list: the virtual list of rows, its scroll position, the "N new" pill and the empty states.

import { $ } from './dom.js';
import { VirtualList } from './virtuallist.js';
import { S, count, keyAt, itemAt } from './store.js';
import { createRow, fillRow, decorate } from './rows.js';
import { loadMore } from './paging.js';

const ROW_H = 22;
const EDGE = 80;           // load the next page when this close to the end of what is loaded

export const scrollEl = $('#list-scroll');
const bodyEl = $('#list-body');

export const list = new VirtualList(scrollEl, bodyEl, {
  rowHeight: ROW_H,
  count,
  keyAt,
  itemAt,
  create: createRow,
  fill: fillRow,
  decorate,
  onRange: onRange,
});

function onRange(first, last, n) {
  // Keyset paging: ask for the next (older) page when the view nears the oldest loaded row.
  if (S.started && S.next !== null && !S.loading) {
    const nearEnd = S.newestFirst ? last >= n - EDGE : first <= EDGE;
    if (nearEnd) loadMore();
  }
  updateEmpty();
  updatePill();
}

export const atTop = () => scrollEl.scrollTop < ROW_H / 2;
export const atBottom = () => scrollEl.scrollTop + scrollEl.clientHeight >= scrollEl.scrollHeight - ROW_H;

export function scrollToEnd() {
  scrollEl.scrollTop = scrollEl.scrollHeight;
  list.render();
}

const pill = $('#new-pill');
export function updatePill() {
  if (S.newestFirst ? atTop() : atBottom()) S.newCount = 0;
  pill.hidden = S.newCount <= 0;
  if (!pill.hidden) {
    pill.querySelector('.n').textContent = S.newCount.toLocaleString('en-US');
    pill.firstChild.textContent = S.newestFirst ? '↑ ' : '↓ ';
  }
}
pill.addEventListener('click', () => {
  S.newCount = 0;
  if (S.newestFirst) { scrollEl.scrollTop = 0; list.render(); } else scrollToEnd();
  updatePill();
});

export function updateEmpty() {
  const empty = count() === 0 && S.started && !S.loadingFirst;
  $('#empty-state').hidden = !(empty && !S.filter.trim());
  $('#empty-filter').hidden = !(empty && !!S.filter.trim());
  $('#empty-filter .empty-title').textContent = S.filterBad ? 'The filter is not valid' : 'Nothing matches the filter';
  $('#empty-filter p').textContent = S.filterBad ? 'Fix it (the error is under the filter box) or clear it to see the list.' : 'New exchanges that match will appear here live.';
}

/** The detail changed a row's mark or comment: the list shows it at once. */
export function rowAnnotated(id, marker, comment) {
  const r = S.ids.get(id);
  if (r) { r.marker = marker; r.comment = comment; list.refresh(true); }
}
