// The Timing, Connection and Breakpoints tabs of the detail pane.

import { h } from './dom.js';
import { fmtTime, fmtDateTime, fmtDur, fmtInt, splitUrl } from './util.js';
import { S } from './store.js';
import { selectId } from './selection.js';
import { showDevice } from './views.js';

export function kv(k, v) {
  return h('tr', null, h('td', null, k), h('td', null, v === null || v === undefined || v === '' ? '—' : v));
}

// ---------------------------------------------------------------- timing
export function renderTiming(box, ex) {
  const t = k => (ex[k] ? Date.parse(ex[k]) : NaN);
  const t0 = t('started_at');
  const tc = t('connected_at'), tt = t('tls_done_at'), tf = t('first_byte_at'), te = t('ended_at');
  if (isNaN(t0)) { box.appendChild(h('div', { class: 'notice' }, 'No timing recorded.')); return; }
  const end = !isNaN(te) ? te : t0 + (ex.duration_ms || 0);
  const phases = [];
  // A reused connection may have connected before this exchange started: clamp at start.
  const c0 = t0;
  const c1 = !isNaN(tc) ? Math.max(tc, t0) : NaN;
  if (!isNaN(c1)) phases.push(['connect', 'Connect', c0, c1]);
  const tlsStart = !isNaN(c1) ? c1 : t0;
  if (!isNaN(tt)) phases.push(['tls', 'TLS handshake', tlsStart, Math.max(tt, tlsStart)]);
  const waitStart = !isNaN(tt) ? Math.max(tt, tlsStart) : tlsStart;
  if (!isNaN(tf)) phases.push(['wait', 'Waiting (TTFB)', waitStart, Math.max(tf, waitStart)]);
  if (!isNaN(tf) && !isNaN(te)) phases.push(['receive', 'Receiving', Math.max(tf, waitStart), Math.max(te, tf)]);
  if (!phases.length) phases.push(['total', 'Total', t0, end]);
  const span = Math.max(1, end - t0, ...phases.map(p => p[3] - t0));
  box.appendChild(h('div', { class: 'sec-title' }, 'Waterfall', h('span', { class: 'muted' }, 'total ' + fmtDur(ex.duration_ms !== null && ex.duration_ms !== undefined ? ex.duration_ms : end - t0))));
  const wf = h('div', { class: 'wf' });
  for (const [cls, label, a, b] of phases) {
    const bar = h('div', { class: 'wf-bar ' + cls, title: label + ': ' + (b - a) + ' ms' });
    bar.style.left = ((a - t0) / span * 100) + '%';
    bar.style.width = Math.max(0.3, (b - a) / span * 100) + '%';
    wf.appendChild(h('div', { class: 'wf-label' }, label));
    wf.appendChild(h('div', { class: 'wf-track' }, bar));
    wf.appendChild(h('div', { class: 'wf-ms' }, fmtDur(b - a)));
  }
  wf.appendChild(h('div', { class: 'wf-axis' }, h('span', null, '0'), h('span', null, fmtDur(span / 2)), h('span', null, fmtDur(span))));
  box.appendChild(wf);
  box.appendChild(h('div', { class: 'sec-title' }, 'Timestamps'));
  const rel = k => (isNaN(t(k)) ? '—' : fmtDateTime(ex[k]) + '   (+' + (t(k) - t0) + ' ms)');
  box.appendChild(h('table', { class: 'kv plain' }, h('tbody', null,
    kv('Started', fmtDateTime(ex.started_at)), kv('Connected', rel('connected_at')), kv('TLS done', rel('tls_done_at')),
    kv('First byte', rel('first_byte_at')), kv('Ended', rel('ended_at')))));
}

// ---------------------------------------------------------------- connection
export function renderConnection(box, ex) {
  const tlsText = { mitm: 'mitm — intercepted and decrypted', passthrough: 'passthrough — tunnelled, not decrypted', none: 'none — plain HTTP' };
  const th = ex.tls_handshake || {};
  const resent = ex.resent_from !== null && ex.resent_from !== undefined
    ? h('a', { href: '#', onclick: e => { e.preventDefault(); selectId(ex.resent_from); } }, '#' + ex.resent_from) : null;
  box.appendChild(h('table', { class: 'kv plain' }, h('tbody', null,
    kv('Device', ex.device ? h('a', { href: '#', title: 'Show this device\'s traffic', onclick: e => { e.preventDefault(); showDevice(ex.device); } }, ex.device) : null),
    kv('Front end', ex.front_end),
    kv('Client address', ex.client_address), kv('Server address', ex.server_address),
    kv('TLS', tlsText[ex.tls] || ex.tls), kv('SNI', th.sni), kv('TLS version', th.version), kv('Cipher', th.cipher),
    kv('Bytes up', ex.bytes_up !== undefined && ex.bytes_up !== null ? fmtInt(ex.bytes_up) + ' B' : null),
    kv('Bytes down', ex.bytes_down !== undefined && ex.bytes_down !== null ? fmtInt(ex.bytes_down) + ' B' : null),
    kv('HTTP version', ex.request && ex.request.http_version),
    kv('HTTP/2 stream', ex.stream_id !== null && ex.stream_id !== undefined ? String(ex.stream_id) : null),
    kv('Connection', ex.connection_id),
    kv('Rule applied', ex.rule),
    kv('Resent from', resent), kv('Imported', ex.imported ? 'yes (from a HAR file)' : 'no'),
    kv('Request ID', ex.request_id), kv('Exchange ID', String(ex.id)))));
  renderSiblings(box, ex);
}

/** The other exchanges of this client connection among the loaded rows: an HTTP/2 connection's streams. */
function renderSiblings(box, ex) {
  if (!ex.connection_id) return;
  const same = [...S.ids.values()].filter(r => r.connection_id === ex.connection_id && r.id !== ex.id).sort((a, b) => a.id - b.id);
  if (!same.length) return;
  box.appendChild(h('div', { class: 'sec-title' }, 'Same connection', h('span', { class: 'muted' }, String(same.length) + ' loaded')));
  const tb = h('tbody');
  for (const r of same.slice(0, 100)) {
    tb.appendChild(h('tr', null,
      h('td', null, h('a', { href: '#', onclick: e => { e.preventDefault(); selectId(r.id); } }, '#' + r.id)),
      h('td', null, r.stream_id !== null && r.stream_id !== undefined ? 'stream ' + r.stream_id : ''),
      h('td', { title: r.url || '' }, (r.method || '') + ' ' + (splitUrl(r.url)[1] || r.url || '')), h('td', null, r.status ? String(r.status) : '—')));
  }
  box.appendChild(h('table', { class: 'rules-table', 'data-test': 'same-connection' }, tb));
}

// ---------------------------------------------------------------- breakpoints
export function renderBreakpoints(box, ex) {
  const list = ex.breakpoints || [];
  if (!list.length) { box.appendChild(h('div', { class: 'notice' }, 'No breakpoint paused this exchange.')); return; }
  const tb = h('tbody');
  for (const b of list) {
    const held = b.paused_at && b.resumed_at ? fmtDur(Date.parse(b.resumed_at) - Date.parse(b.paused_at)) : '—';
    tb.appendChild(h('tr', null, h('td', null, String(b.id)), h('td', null, b.kind), h('td', null, fmtTime(b.paused_at)),
      h('td', null, b.resumed_at ? fmtTime(b.resumed_at) : 'still held'), h('td', null, held), h('td', null, b.outcome || '—')));
  }
  box.appendChild(h('table', { class: 'rules-table' },
    h('thead', null, h('tr', null, ['#', 'Side', 'Paused', 'Resumed', 'Held for', 'Outcome'].map(x => h('th', null, x)))), tb));
}
