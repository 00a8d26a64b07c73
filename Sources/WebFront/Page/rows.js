// The traffic list's rows: one row element per exchange (or in-flight entry), its cells and chips.

import { h, $, clear } from './dom.js';
import { fmtTime, fmtSize, fmtDur, fmtInt, shortType, hostWithPort, splitUrl, statusClass, dnsInfo } from './util.js';
import { S, itemAt } from './store.js';

const COLS = ['c-id', 'c-time', 'c-device', 'c-method', 'c-status', 'c-host', 'c-path', 'c-type', 'c-size', 'c-dur', 'c-tls', 'c-marks'];
const listPane = $('#list-pane');

export function createRow() {
  const el = h('div', { class: 'row row-grid', role: 'row' });
  el._c = {};
  for (const c of COLS) el._c[c.slice(2)] = el.appendChild(h('span', { class: c }));
  return el;
}

function setText(span, text, title) {
  if (span.textContent !== text) span.textContent = text;
  if (title) span.title = title; else if (span.title) span.removeAttribute('title');
}

function chip(cls, text, title, attrs) {
  const c = h('span', Object.assign({ class: 'chip ' + cls, title: title || null }, attrs || {}), text);
  return c;
}

/** The Device column shows once any device is known (named, seen, or on a loaded row). */
export function showDeviceColumn(on) {
  if (on && !listPane.classList.contains('with-device')) listPane.classList.add('with-device');
}

export function fillRow(el, i) {
  const it = itemAt(i);
  const c = el._c;
  if (it._open) {
    el.removeAttribute('data-id');
    el.setAttribute('data-request-id', it.request_id);
    el.className = 'row row-grid open';
    const [host, path] = splitUrl(it.url);
    setText(c.id, '');
    setText(c.time, fmtTime(it.started_at));
    setText(c.device, it.device || '', it.device ? 'device ' + it.device : null);
    setText(c.method, it.method || '');
    c.status.className = 'c-status st pending';
    setText(c.status, it.held ? 'held' : '…', it.held ? 'held at a breakpoint' : 'in flight');
    const shownHost = hostWithPort(it.url, null) || host;
    setText(c.host, shownHost, shownHost);
    setText(c.path, path, it.url);
    for (const k of ['type', 'size', 'dur', 'tls']) setText(c[k], '');
    c.tls.className = 'c-tls tls';
    clear(c.marks);
    if (it.held) c.marks.appendChild(chip('held', 'B', 'held at a breakpoint'));
    return;
  }
  const r = it;
  el.removeAttribute('data-request-id');
  el.setAttribute('data-id', r.id);
  if (r._t === undefined) {
    r._t = fmtTime(r.started_at);
    r._dns = dnsInfo(r);
    const parts = splitUrl(r.url);
    r._host = r._dns ? r._dns.name : hostWithPort(r.url, r.host);
    r._path = r._dns ? r._dns.name + ' ' + r._dns.type : parts[1];
    r._hostTitle = r._host + (r.device ? '\ndevice ' + r.device : '') + (r.front_end ? ' (via ' + r.front_end + ')' : '');
  }
  const dns = r._dns;
  el.className = 'row row-grid' + (r.error ? ' error' : '') + (dns ? ' dns' : '');
  if (r.device) showDeviceColumn(true);
  setText(c.id, String(r.id));
  setText(c.time, r._t, r.started_at);
  setText(c.device, r.device || '', r.device ? 'device ' + r.device + (r.front_end ? ' · via ' + r.front_end : '') : null);
  setText(c.method, r.method || '');
  if (r.error) {
    c.status.className = 'c-status st err';
    setText(c.status, 'ERR', r.error);
  } else if (dns) {
    c.status.className = 'c-status st ' + (dns.ok ? 'dns-ok' : 'dns-err');
    setText(c.status, dns.rcode || '—', 'DNS answer: ' + (dns.rcode || 'none') + (r.status !== null && r.status !== undefined ? ' (rcode ' + r.status + ')' : ''));
  } else if (r.status === null || r.status === undefined) {
    c.status.className = 'c-status st';
    setText(c.status, '—', r.tls === 'passthrough' ? 'TLS passthrough: not decrypted' : 'no response');
  } else {
    c.status.className = 'c-status st ' + statusClass(r.status);
    setText(c.status, String(r.status));
  }
  setText(c.host, r._host, r._hostTitle);
  setText(c.path, r._path, r.url);
  const ws = r.websocket;
  if (ws) {
    // A WebSocket: its messages for a size, open until it closes.
    const n = ws.messages_up + ws.messages_down;
    setText(c.type, 'ws', 'WebSocket' + (ws.extensions ? ' · ' + ws.extensions : ''));
    setText(c.size, fmtInt(n) + ' msg', ws.messages_up + ' client → server, ' + ws.messages_down + ' server → client');
    setText(c.dur, ws.state === 'open' ? 'open' : fmtDur(r.duration_ms), ws.state === 'open' ? 'the socket is open' : null);
  } else {
    setText(c.type, dns ? 'dns' : shortType(r.response_content_type), dns ? 'DNS query ' + dns.type : r.response_content_type || null);
    setText(c.size, r.status === null && !r.response_size ? '' : fmtSize(r.response_size),
      'response ' + fmtInt(r.response_size) + ' B' + (r.request_size ? ' · request ' + fmtInt(r.request_size) + ' B' : ''));
    setText(c.dur, fmtDur(r.duration_ms));
  }
  c.tls.className = 'c-tls tls ' + (dns ? '' : r.tls || '');
  if (dns) setText(c.tls, '');
  else {
    setText(c.tls, r.tls === 'mitm' ? 'mitm' : r.tls === 'passthrough' ? 'pass' : '—',
      r.tls === 'mitm' ? 'TLS intercepted (MITM)' : r.tls === 'passthrough' ? 'TLS passed through, not decrypted' : 'plain HTTP');
  }
  const m = c.marks;
  clear(m);
  if (r.held) m.appendChild(chip('held', 'B', 'held at a breakpoint now'));
  if (r.rule) m.appendChild(chip('rule', r.rule, 'rule applied: ' + r.rule));
  if (r.resent_from !== null && r.resent_from !== undefined) {
    m.appendChild(chip('resent', '↻ from #' + r.resent_from, 'resent from #' + r.resent_from + ' (click to select it)', { 'data-origin': r.resent_from }));
  }
  if (r.http_version === 'HTTP/2.0') {
    m.appendChild(chip('h2', 'h2', 'HTTP/2' + (r.stream_id !== null && r.stream_id !== undefined ? ', stream ' + r.stream_id : '')
      + (r.connection_id ? ' on connection ' + r.connection_id : ''), { 'data-test': 'h2-chip' }));
  }
  if (r.imported) m.appendChild(chip('imported', 'imported', 'imported from a HAR file'));
  if (r.marker) m.appendChild(chip('marked', r.marker === 'default' ? '★' : r.marker, 'marked' + (r.marker === 'default' ? '' : ': ' + r.marker), { 'data-test': 'mark-chip' }));
  if (r.comment) m.appendChild(chip('comment', '✎', r.comment, { 'data-test': 'comment-chip' }));
}

export function decorate(el, i, key) {
  const it = el._item;
  el.classList.toggle('odd', i % 2 === 1);
  el.classList.toggle('sel', key === S.sel);
  el.classList.toggle('hl', !it._open && S.hl.has(it.id));
}
