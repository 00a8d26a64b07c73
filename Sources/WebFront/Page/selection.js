// The selected row: click and keyboard selection, and opening it in the detail pane.

import { $, toast } from './dom.js';
import { debounce } from './util.js';
import { S, count, keyAt } from './store.js';
import { list, scrollEl } from './list.js';
import { open as openDetail, isOpen as detailIsOpen, showInflight } from './detail.js';

const bodyEl = $('#list-body');

export function indexOfKey(key) {
  if (!key) return -1;
  const el = list.shown.get(key);
  if (el && el._key === key) return el._i;
  const n = count();
  for (let i = 0; i < n; i++) if (keyAt(i) === key) return i;
  return -1;
}

const detailSoon = debounce(() => openSelected(), 90);

export function select(key, opts) {
  S.sel = key;
  list.refresh(false);
  if (opts && opts.scroll) {
    const i = indexOfKey(key);
    if (i >= 0) list.scrollToIndex(i, opts.center ? 'center' : undefined);
  }
  if (opts && opts.open) openSelected();
  else if (detailIsOpen()) detailSoon();
}

export function openSelected() {
  if (!S.sel) return;
  if (S.sel[0] === 's') openDetail(Number(S.sel.slice(1)));
  else {
    const e = S.inflight.find(x => 'r' + x.request_id === S.sel);
    if (e) showInflight(e);
  }
}

export function move(delta) {
  const n = count();
  if (!n) return;
  let i = indexOfKey(S.sel);
  if (i < 0) i = delta > 0 ? Math.max(list.first - 1, -1) : Math.min(list.last + 1, n);
  i = Math.max(0, Math.min(n - 1, i + delta));
  select(keyAt(i), { scroll: true });
}

/** Select a stored row by id if it is loaded (for "↻ from #N" links). */
export function selectId(id) {
  const key = 's' + id;
  if (!S.ids.has(Number(id))) {
    toast('#' + id + ' is not loaded in the list (scroll further, or it is filtered out)');
    openDetail(Number(id));
    return;
  }
  select(key, { scroll: true, center: true, open: true });
}

bodyEl.addEventListener('click', ev => {
  const origin = ev.target.closest('.chip.resent');
  if (origin) {
    ev.stopPropagation();
    selectId(Number(origin.getAttribute('data-origin')));
    return;
  }
  const row = ev.target.closest('.row');
  if (!row || !row._key) return;
  scrollEl.focus({ preventScroll: true });
  select(row._key, { open: true });
});
