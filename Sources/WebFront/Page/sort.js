// The sort order button: newest first, or the loaded rows oldest first; kept in localStorage.

import { $ } from './dom.js';
import { S } from './store.js';
import { list, scrollEl, scrollToEnd, updatePill } from './list.js';
import { indexOfKey } from './selection.js';

// The API pages newest first only; "oldest first" shows the loaded rows reversed (older
// pages load when scrolling near the top, live rows append at the bottom and the view
// follows them while scrolled to the end), not the capture's true oldest rows first.
const sortBtn = $('#sort-order');
function setSort(newestFirst, keepSel) {
  S.newestFirst = newestFirst;
  sortBtn.textContent = newestFirst ? '↓ Newest first' : '↑ Oldest first';
  sortBtn.title = newestFirst ? 'Newest first (click for oldest first)' : 'Oldest first among loaded rows (click for newest first)';
  S.newCount = 0;
  list.refresh(true);
  const i = keepSel ? indexOfKey(S.sel) : -1;
  if (i >= 0) list.scrollToIndex(i, 'center');
  else if (newestFirst) { scrollEl.scrollTop = 0; list.render(); } else scrollToEnd();
  localStorage.setItem('bm-sort', newestFirst ? 'newest' : 'oldest');
  updatePill();
}
sortBtn.addEventListener('click', () => setSort(!S.newestFirst, true));

/** At start: the order chosen last time. */
export function restoreSort() {
  S.newestFirst = localStorage.getItem('bm-sort') !== 'oldest';
  sortBtn.textContent = S.newestFirst ? '↓ Newest first' : '↑ Oldest first';
}
