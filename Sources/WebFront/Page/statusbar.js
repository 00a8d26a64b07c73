// The status bar: readiness, requests per second, rows stored and loaded, highlighted, and the live feed's state.

import { $ } from './dom.js';
import { fmtInt } from './util.js';
import { S, storedCount } from './store.js';
import { readiness } from './readiness.js';

export function setLive(state, detail) {
  S.live = state;
  const el = $('#live-state');
  const dot = $('#sb-live .dot');
  const sb = $('#sb-live');
  sb.classList.toggle('down', state === 'down');
  dot.className = 'dot ' + (state === 'live' ? 'green' : state === 'down' ? 'red pulse' : 'amber pulse');
  el.textContent = state === 'live' ? 'live' : state === 'down' ? 'disconnected – reconnecting' + (detail || '') : 'connecting…';
  sb.title = state === 'live' ? 'Live feed connected' : 'Live feed: ' + el.textContent;
}

export function updateStatusbar() {
  const st = S.status;
  if (st) {
    // The Status view's verdict, from the same function: the two never disagree.
    const r = readiness(st);
    const item = $('#sb-tunnel');
    item.setAttribute('data-state', r.state);
    item.title = 'tunnel ' + ((st.tunnel && st.tunnel.state) || 'unknown') + ' · the Status view says why';
    $('#sb-tunnel .dot').className = 'dot ' + r.state;
    $('#sb-tunnel .t').textContent = r.headline;
    const rps = st.counters && st.counters.requests_per_second;
    $('#sb-rps').textContent = (typeof rps === 'number' ? rps.toFixed(rps < 10 ? 1 : 0) : '—') + ' req/s';
    $('#sb-stored').textContent = fmtInt(st.store && st.store.exchanges) + ' stored';
  }
  const n = storedCount();
  $('#sb-loaded').textContent = n.toLocaleString('en-US') + ' loaded' + (S.filter.trim() ? ' (filtered)' : '') + (S.next === null && S.started ? ' · all' : '') +
    (S.inflight.length ? ' · ' + S.inflight.length + ' in flight' : '');
  const hl = $('#sb-hl');
  hl.hidden = !S.highlight.trim();
  if (!hl.hidden) {
    let n = 0;
    for (const id of S.hl) if (S.ids.has(id)) n++;
    hl.textContent = n.toLocaleString('en-US') + ' highlighted';
  }
}
