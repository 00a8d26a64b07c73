// The splitter between the list and the detail pane: drag to resize, the width kept in localStorage.

import { $ } from './dom.js';
import { list } from './list.js';

const splitter = $('#splitter');
const detailEl = $('#detail');
const savedW = Number(localStorage.getItem('bm-detail-w'));
if (savedW > 200) detailEl.style.width = savedW + 'px';
splitter.addEventListener('pointerdown', ev => {
  ev.preventDefault();
  splitter.setPointerCapture(ev.pointerId);
  splitter.classList.add('dragging');
  const main = $('#view-traffic').getBoundingClientRect();
  const onMove = e => {
    const w = Math.max(320, Math.min(main.width - 300, main.right - e.clientX));
    detailEl.style.width = w + 'px';
  };
  const onUp = () => {
    splitter.classList.remove('dragging');
    splitter.removeEventListener('pointermove', onMove);
    splitter.removeEventListener('pointerup', onUp);
    localStorage.setItem('bm-detail-w', String(parseInt(detailEl.style.width, 10) || 0));
    list.render();
  };
  splitter.addEventListener('pointermove', onMove);
  splitter.addEventListener('pointerup', onUp);
});
