// The detail pane of one exchange: its head, actions (resend, cURL, mark, comment) and tabs.
// Captured data only ever reaches the DOM through textContent.

import { h, $, clear, toast, copyText } from './dom.js';
import { fmtDateTime, statusClass, dnsInfo } from './util.js';
import { api } from './api.js';
import { S } from './store.js';
import { list, scrollEl, rowAnnotated } from './list.js';
import { renderMessage } from './detailbody.js';
import { kv, renderTiming, renderConnection, renderBreakpoints } from './detailinfo.js';
import { render as renderMessages, stop as stopMessages } from './messages.js';
import { openCompose, resendAsIs } from './compose.js';
import { openHeld } from './held.js';

const pane = $('#detail');
const splitter = $('#splitter');
const TABS = [['request', 'Request'], ['response', 'Response'], ['messages', 'Messages'], ['timing', 'Timing'], ['connection', 'Connection'],
  ['breakpoints', 'Breakpoints']];
let cur = null;            // the exchange shown (full JSON)
let curId = null;
let tab = localStorage.getItem('bm-tab') || 'response';

function show() {
  if (pane.hidden) {
    pane.hidden = false;
    splitter.hidden = false;
    list.render();
  }
}

export function close() {
  stopMessages();
  S.detailGen++;
  cur = null;
  curId = null;
  pane.hidden = true;
  splitter.hidden = true;
  clear(pane);
  list.render();
  scrollEl.focus({ preventScroll: true });
}

export function isOpen() { return !pane.hidden; }

export async function open(id) {
  show();
  if (curId === id && cur) return;
  const g = ++S.detailGen;
  curId = id;
  const row = S.ids.get(id);
  renderLoading(id, row);
  let ex;
  try {
    ex = await api('GET', '/api/exchanges/' + id);
  } catch (e) {
    if (g !== S.detailGen) return;
    cur = null;
    clear(pane);
    pane.appendChild(head(id, row, null));
    pane.appendChild(h('div', { class: 'tab-body' }, h('div', { class: 'notice error' },
      e.status === 404 ? 'Exchange #' + id + ' is gone (the capture was cleared, or retention removed it).' : 'Could not load #' + id + ': ' + e.message)));
    return;
  }
  if (g !== S.detailGen) return;
  cur = ex;
  render();
}

function head(id, row, ex) {
  const r = ex || row || {};
  const dns = dnsInfo(r.response && r.response.reason ? Object.assign({}, r, { reason: r.response.reason }) : r);
  const status = r.error ? h('span', { class: 'st err', title: r.error }, 'ERR')
    : dns ? h('span', { class: 'st ' + (dns.ok ? 'dns-ok' : 'dns-err') }, dns.rcode)
      : r.status ? h('span', { class: 'st ' + statusClass(r.status) }, String(r.status)) : null;
  return h('div', { class: 'd-head' },
    h('div', { class: 'd-title' },
      h('span', { class: 'd-id' }, '#' + id),
      r.method ? h('span', { class: 'd-method' }, r.method) : null,
      status,
      h('span', { class: 'd-url', title: r.url || '' }, r.url || '')),
    h('button', { type: 'button', class: 'tool icon', title: 'Close (Esc)', 'aria-label': 'Close detail', onclick: close }, '×'));
}

/** A mark or comment, saved in the store; the list and this pane follow. */
async function annotate(ex, change) {
  const g = S.detailGen;
  try {
    const saved = await api('PUT', '/api/exchanges/' + ex.id + '/annotation', change);
    rowAnnotated(ex.id, saved.marker, saved.comment);
    if (g !== S.detailGen || cur !== ex) return;
    ex.marker = saved.marker;
    ex.comment = saved.comment;
    render();
  } catch (e) {
    toast('Could not save: ' + e.message, true);
  }
}

function renderLoading(id, row) {
  clear(pane);
  pane.appendChild(head(id, row, null));
  pane.appendChild(h('div', { class: 'tab-body muted' }, 'Loading…'));
}

/** An in-flight (or held) entry: no stored exchange yet. */
export function showInflight(e) {
  show();
  S.detailGen++;
  cur = null;
  curId = null;
  clear(pane);
  pane.appendChild(head('…', e, null));
  const body = h('div', { class: 'tab-body' },
    h('div', { class: 'notice' }, e.held ? 'This request is held at a breakpoint. ' : 'This exchange is still in flight; its detail appears when it is stored.'),
    e.held ? h('p', null, h('button', { type: 'button', class: 'btn primary', onclick: () => openHeld() }, 'Open the held panel')) : null,
    h('table', { class: 'kv plain' }, h('tbody', null,
      kv('Request ID', e.request_id), kv('Started', fmtDateTime(e.started_at)), kv('Method', e.method), kv('URL', e.url))));
  pane.appendChild(body);
}

function render() {
  const ex = cur;
  stopMessages();
  clear(pane);
  pane.appendChild(head(ex.id, null, ex));
  pane.appendChild(h('div', { class: 'd-actions' },
    h('button', { type: 'button', id: 'resend', 'data-test': 'resend', class: 'btn', title: 'Edit and resend', onclick: () => openCompose(ex) }, '✎ Edit & resend…'),
    h('button', { type: 'button', id: 'resend-as-is', 'data-test': 'resend-as-is', class: 'btn', title: 'Send the same request again', onclick: () => resendAsIs(ex.id) }, '↻ Resend'),
    h('button', { type: 'button', id: 'copy-curl', 'data-test': 'copy-curl', class: 'btn', disabled: !ex.curl, onclick: copyCurl }, 'Copy as cURL'),
    h('button', { type: 'button', id: 'mark', 'data-test': 'mark', class: 'btn' + (ex.marker ? ' on' : ''), 'aria-pressed': ex.marker ? 'true' : 'false',
      title: ex.marker ? 'Remove the mark (~marked finds marked exchanges)' : 'Mark this exchange (~marked finds it)',
      onclick: () => annotate(ex, { marker: ex.marker ? null : 'default' }) }, ex.marker ? '★ Marked' : '☆ Mark'),
    h('input', { type: 'text', id: 'comment', 'data-test': 'comment', class: 'comment', maxlength: '4096', placeholder: 'Comment…',
      value: ex.comment || '', title: 'A comment kept with the exchange (Enter saves; ~comment finds it)',
      onkeydown: e => { if (e.key === 'Enter') e.target.blur(); },
      onchange: e => annotate(ex, { comment: e.target.value }) })));
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  for (const [key, label] of TABS) {
    // Messages: a WebSocket's only.
    if (key === 'messages' && !ex.websocket) continue;
    let extra = null;
    if (key === 'messages') extra = h('span', { class: 'count', 'data-test': 'messages-count' }, String(ex.websocket.messages_up + ex.websocket.messages_down));
    if (key === 'breakpoints' && ex.breakpoints && ex.breakpoints.length) extra = h('span', { class: 'count' }, String(ex.breakpoints.length));
    if (key === 'request') extra = h('span', { class: 'count' }, String((ex.request && ex.request.headers || []).length));
    if (key === 'response' && ex.response) extra = h('span', { class: 'count' }, String((ex.response.headers || []).length));
    tabs.appendChild(h('button', { type: 'button', class: 'tab' + (key === tab ? ' active' : ''), 'data-tab': key, role: 'tab', onclick: () => setTab(key) }, label, extra));
  }
  pane.appendChild(tabs);
  const body = h('div', { class: 'tab-body', id: 'tab-body' });
  pane.appendChild(body);
  renderTab(body);
}

function setTab(key) {
  if (tab === 'messages' && key !== 'messages') stopMessages();
  tab = key;
  localStorage.setItem('bm-tab', key);
  if (!cur) return;
  for (const b of pane.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === key);
  const body = $('#tab-body');
  clear(body);
  body.scrollTop = 0;
  renderTab(body);
}

function renderTab(body) {
  const ex = cur;
  switch (tab) {
    case 'request': renderMessage(body, ex, 'request'); break;
    case 'response': renderMessage(body, ex, 'response'); break;
    case 'timing': renderTiming(body, ex); break;
    case 'connection': renderConnection(body, ex); break;
    case 'breakpoints': renderBreakpoints(body, ex); break;
    case 'messages':
      if (ex.websocket) { renderMessages(body, ex); break; }
      renderMessage(body, ex, 'response');
      break;
    default: renderMessage(body, ex, 'response');
  }
}

async function copyCurl() {
  if (!cur || !cur.curl) return;
  toast(await copyText(cur.curl) ? 'cURL command copied' : 'Could not copy to the clipboard', false);
}

/** Bumped whenever the pane shows something else: work started for what it showed before drops its answer. */
