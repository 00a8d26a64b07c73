// The filter and highlight boxes: typing, Enter/Escape, and the error shown under a box the API refused.

import { $ } from './dom.js';
import { debounce } from './util.js';
import { S } from './store.js';
import { scrollEl } from './list.js';
import { reload } from './paging.js';
import { refreshHighlight } from './highlight.js';
import { move } from './selection.js';
import { writeHash } from './router.js';

export const filterEl = $('#filter');
export const hlEl = $('#highlight');
let charWidth = 0;

function measureChar(input) {
  if (charWidth) return charWidth;
  const cs = getComputedStyle(input);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = cs.fontSize + ' ' + cs.fontFamily;
  charWidth = ctx.measureText('0000000000').width / 10 || 7.2;
  return charWidth;
}

/** Show (or, with msg null, hide) the error under an input, with a caret at `position`. */
export function showInputError(which, msg, position) {
  const input = which === 'filter' ? filterEl : hlEl;
  const box = $(which === 'filter' ? '#filter-error' : '#highlight-error');
  input.classList.toggle('invalid', !!msg);
  if (!msg) { box.hidden = true; return; }
  // `position` counts characters from 1, as the API and the CLI say it ("position 12: …").
  const at = typeof position === 'number' && position >= 1 ? position : null;
  box.querySelector('.msg').textContent = at !== null ? 'position ' + at + ': ' + msg : msg;
  const caret = box.querySelector('.caret-mark');
  if (at !== null) {
    const cs = getComputedStyle(input);
    const x = parseFloat(cs.paddingLeft) + Math.min(at - 1, input.value.length) * measureChar(input) - input.scrollLeft;
    caret.style.left = Math.max(0, Math.min(input.clientWidth - 9, x - 4)) + 'px';
    caret.hidden = false;
  } else caret.hidden = true;
  box.hidden = false;
}

export function applyFilterInput() {
  const v = filterEl.value;
  filterEl.classList.toggle('active', !!v.trim());
  $('#filter-clear').hidden = !v;
  if (v === S.filter && S.started) return;
  S.filter = v;
  writeHash();
  reload();
}
export const filterSoon = debounce(applyFilterInput, 250);
filterEl.addEventListener('input', () => { $('#filter-clear').hidden = !filterEl.value; filterSoon(); });
filterEl.addEventListener('keydown', ev => {
  if (ev.key === 'Enter') { filterSoon.cancel(); S.started && filterEl.value === S.filter ? reload() : applyFilterInput(); }
  else if (ev.key === 'Escape') { filterEl.blur(); scrollEl.focus(); }
  else if (ev.key === 'ArrowDown') { ev.preventDefault(); scrollEl.focus(); move(1); }
});
$('#filter-clear').addEventListener('click', () => { filterEl.value = ''; filterSoon.cancel(); applyFilterInput(); filterEl.focus(); });

export function applyHighlightInput() {
  const v = hlEl.value;
  hlEl.classList.toggle('active', !!v.trim());
  if (v === S.highlight) return;
  S.highlight = v;
  writeHash();
  refreshHighlight();
}
const hlSoon = debounce(applyHighlightInput, 250);
hlEl.addEventListener('input', hlSoon);
hlEl.addEventListener('keydown', ev => {
  if (ev.key === 'Enter') { hlSoon.cancel(); applyHighlightInput(); }
  else if (ev.key === 'Escape') { hlEl.blur(); scrollEl.focus(); }
});
