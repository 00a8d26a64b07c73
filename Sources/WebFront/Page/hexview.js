// The hex view of a body: a scroller as tall as the dump, its lines fetched 64 KiB at a time as they come into view.

import { h, clear } from './dom.js';
import { fmtInt } from './util.js';
import { api, qs } from './api.js';
import { S } from './store.js';

/**
 * Hex dump of the whole body in a scroller as tall as the dump: only the lines in view are drawn,
 * and their 64 KiB chunks are fetched from /hex as they come into view (a few kept), so the last
 * byte of a large body is a scroll away. Past what an element can be tall, the scroll position
 * maps onto the lines proportionally.
 */
export function hexView(view, id, side) {
  const LINE_H = 18, CHUNK = 64 << 10, PER_CHUNK = CHUNK / 16, KEEP = 24, MAX_H = 8e6;
  const pre = h('pre', { class: 'hex hex-window' });
  const spacer = h('div', { class: 'hex-spacer' }, pre);
  const scroller = h('div', { class: 'hex-scroll', tabindex: '0', 'data-test': 'hex-scroll', 'aria-label': side + ' body, hex' }, spacer);
  const info = h('div', { class: 'more-row' }, h('span', { class: 'muted' }, 'Loading…'));
  view.appendChild(scroller);
  view.appendChild(info);
  const myGen = S.detailGen;
  const chunks = new Map();   // chunk number -> lines, or 'loading'
  let total = 0, lines = 0, full = 0, height = 0, failed = null, frame = 0;

  const fetchChunk = async n => {
    chunks.set(n, 'loading');
    try {
      const res = await api('GET', '/api/exchanges/' + id + '/hex' + qs({ side, offset: n * CHUNK, length: CHUNK }));
      if (myGen !== S.detailGen) return null;
      chunks.set(n, res.lines || []);
      // The farthest from what is in view go first.
      while (chunks.size > KEEP) chunks.delete([...chunks.keys()].sort((a, b) => Math.abs(b - n) - Math.abs(a - n))[0]);
      return res;
    } catch (e) {
      chunks.delete(n);
      failed = e;
      clear(info).appendChild(h('span', { class: 'notice error' }, 'Could not load the hex dump: ' + e.message));
      return null;
    }
  };

  const draw = () => {
    frame = 0;
    if (myGen !== S.detailGen || !lines) return;
    const visible = Math.ceil(scroller.clientHeight / LINE_H) + 1;
    let first;
    if (full <= MAX_H) first = Math.floor(scroller.scrollTop / LINE_H);
    else first = Math.round(scroller.scrollTop / Math.max(1, height - scroller.clientHeight) * Math.max(0, lines - visible + 1));
    first = Math.max(0, Math.min(first, lines - 1));
    const last = Math.min(lines, first + visible);
    const out = [];
    for (let i = first; i < last; i++) {
      const n = Math.floor(i / PER_CHUNK);
      const got = chunks.get(n);
      if (got === undefined && !failed) fetchChunk(n).then(res => { if (res) schedule(); });
      out.push(Array.isArray(got) ? (got[i - n * PER_CHUNK] || '') : '');
    }
    pre.textContent = out.join('\n');
    pre.style.transform = 'translateY(' + (full <= MAX_H ? first * LINE_H : scroller.scrollTop) + 'px)';
    if (!failed) {
      clear(info).appendChild(h('span', { class: 'muted small', 'data-test': 'hex-range' },
        'bytes ' + fmtInt(first * 16) + '–' + fmtInt(Math.min(total, last * 16)) + ' of ' + fmtInt(total) + ' · scroll for more'));
    }
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  scroller.addEventListener('scroll', schedule, { passive: true });

  fetchChunk(0).then(res => {
    if (!res) return;
    total = res.total || 0;
    if (!total) { scroller.hidden = true; clear(info).appendChild(h('span', { class: 'muted' }, 'No bytes.')); return; }
    lines = Math.ceil(total / 16);
    full = lines * LINE_H;
    height = Math.min(full, MAX_H);
    spacer.style.height = height + 'px';
    draw();
  });
}
