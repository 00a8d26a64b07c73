// The Messages tab of a WebSocket: its state, its messages in order (→ client
// to server, ← server to client), a filter over them, and new ones as they are
// stored (the live feed's `messages` event). Captured data reaches the DOM
// only through textContent.

import { h, toast } from './dom.js';
import { fmtTime, fmtSize, fmtInt, debounce } from './util.js';
import { api } from './api.js';
import { renderJSONTree } from './jsonview.js';

const PAGE = 500;
const KEEP = 5000;         // messages kept in the tab; older ones make room
let shown = null;          // { ex, box, list, messages, last, busy, more }
let gen = 0;

export function stop() {
  gen++;
  shown = null;
}

function stateText(ws) {
  let t = ws.state === 'open' ? 'Open' : 'Closed';
  if (ws.closed_by) t += ' by the ' + ws.closed_by + (ws.close_code !== null ? ' (' + ws.close_code + (ws.close_reason ? ' ' + ws.close_reason : '') + ')' : '');
  return t + ' · ' + fmtInt(ws.messages_up) + ' → · ' + fmtInt(ws.messages_down) + ' ← · ' + ws.pings + ' pings';
}

export async function render(box, ex) {
  stop();
  const g = gen;
  const filter = h('input', { type: 'search', class: 'msg-filter', 'data-test': 'messages-filter', placeholder: 'Filter messages (text or regex /…/)',
    title: 'Shows the messages whose text contains this (any case), or matches /a regex/' });
  const direction = h('select', { class: 'msg-dir', 'data-test': 'messages-direction', title: 'Which way' },
    h('option', { value: '' }, 'Both ways'), h('option', { value: 'client' }, '→ Client to server'), h('option', { value: 'server' }, '← Server to client'));
  const state = h('div', { class: 'msg-state', 'data-test': 'messages-state' }, stateText(ex.websocket));
  const list = h('div', { class: 'msg-list', 'data-test': 'messages-list' });
  const more = h('button', { type: 'button', class: 'btn', hidden: true, onclick: () => load(g) }, 'Load more');
  box.appendChild(h('div', { class: 'msg-bar' }, state, filter, direction));
  const compose = composer(ex);
  box.appendChild(compose);
  box.appendChild(list);
  box.appendChild(more);
  shown = { ex, box, list, state, filter, direction, compose, moreButton: more, messages: [], last: 0, busy: false, more: false };
  const refilter = debounce(() => { if (g === gen) applyFilter(); }, 120);
  filter.addEventListener('input', refilter);
  direction.addEventListener('change', refilter);
  await load(g);
}

/** The next page after the last message shown. */
async function load(g) {
  const s = shown;
  if (!s || g !== gen) return;
  // An arrival during a load is read right after it.
  if (s.busy) { s.again = true; return; }
  s.busy = true;
  try {
    const r = await api('GET', '/api/exchanges/' + s.ex.id + '/messages?after=' + s.last + '&limit=' + PAGE);
    if (g !== gen) return;
    s.state.textContent = stateText(r.websocket);
    s.compose.hidden = r.websocket.state !== 'open';
    const atBottom = s.list.scrollHeight - s.list.scrollTop - s.list.clientHeight < 40;
    for (const m of r.messages) add(s, m);
    s.more = r.next !== null;
    s.moreButton.hidden = !s.more;
    if (atBottom) s.list.scrollTop = s.list.scrollHeight;
  } catch (e) {
    if (g === gen) s.list.appendChild(h('div', { class: 'notice error' }, 'Could not load the messages: ' + e.message));
  } finally {
    s.busy = false;
    if (s.again && g === gen) { s.again = false; load(g); }
  }
}

function add(s, m) {
  s.last = m.seq;
  const row = h('div', { class: 'msg ' + (m.from === 'client' ? 'up' : 'down'), 'data-test': 'message', 'data-seq': String(m.seq) },
    h('span', { class: 'msg-arrow', title: m.from === 'client' ? 'client → server' : 'server → client' }, m.from === 'client' ? '→' : '←'),
    h('span', { class: 'msg-time', title: m.at }, fmtTime(m.at)),
    h('span', { class: 'msg-seq' }, '#' + m.seq),
    h('span', { class: 'msg-kind' }, m.type + (m.origin !== 'relayed' ? ' · ' + m.origin : '')),
    h('span', { class: 'msg-size', title: m.compressed ? 'compressed to ' + fmtInt(m.wire_length) + ' B on the wire' : '' },
      fmtSize(m.length) + (m.frames > 1 ? ' · ' + m.frames + ' frames' : '')),
    h('span', { class: 'msg-preview', 'data-test': 'message-text' }, preview(m)));
  row._m = m;
  row.addEventListener('click', () => toggle(row));
  s.messages.push(row);
  s.list.appendChild(row);
  if (s.messages.length > KEEP) s.messages.shift().remove();
  row.hidden = !matches(s, m);
}

/** mitmproxy's inject: a message of the user's own into the open socket. */
function composer(ex) {
  const to = h('select', { 'data-test': 'compose-to', title: 'Where the message goes' },
    h('option', { value: 'server' }, 'To the server'), h('option', { value: 'client' }, 'To the client'));
  const text = h('textarea', { 'data-test': 'compose-text', rows: '2', placeholder: 'A message to send (text; tick base64 for binary bytes)' });
  const binary = h('input', { type: 'checkbox', 'data-test': 'compose-binary' });
  const send = h('button', { type: 'button', class: 'btn primary', 'data-test': 'compose-send' }, 'Send');
  send.addEventListener('click', async () => {
    const body = binary.checked ? { to: to.value, base64: text.value.trim() } : { to: to.value, text: text.value };
    send.disabled = true;
    try {
      const r = await api('POST', '/api/exchanges/' + ex.id + '/messages', body);
      toast('Sent as message #' + r.seq, false);
      text.value = '';
    } catch (e) {
      toast('Not sent: ' + e.message, true);
    } finally {
      send.disabled = false;
    }
  });
  const box = h('div', { class: 'msg-compose', 'data-test': 'composer' }, to, text, h('label', null, binary, ' base64'), send);
  box.hidden = ex.websocket.state !== 'open';
  return box;
}

function preview(m) {
  if (m.text !== undefined) return m.text.length > 300 ? m.text.slice(0, 300) + '…' : m.text;
  return '(' + fmtSize(m.length) + ' binary)';
}

/** The message whole: JSON as a tree, text as sent, binary as a hex dump. */
function toggle(row) {
  const open = row.nextSibling && row.nextSibling.classList && row.nextSibling.classList.contains('msg-full') ? row.nextSibling : null;
  if (open) { open.remove(); return; }
  const m = row._m;
  let view;
  if (m.text !== undefined) {
    view = renderJSONTree(m.text) || h('pre', { class: 'body-text' }, m.text);
  } else {
    view = h('pre', { class: 'hex' }, hexDump(atob(m.base64 || '')));
  }
  const notes = [];
  if (m.cut) notes.push('the first ' + fmtSize(m.text !== undefined ? m.text.length : (m.base64 || '').length * 3 / 4) + ' shown; busymate show ' + shown.ex.id + ' --messages --json has it all');
  if (m.truncated) notes.push('stored ' + fmtInt(m.stored) + ' of ' + fmtInt(m.length) + ' bytes (capture.body_max)');
  row.after(h('div', { class: 'msg-full', 'data-test': 'message-full' }, notes.length ? h('div', { class: 'muted' }, notes.join(' · ')) : null, view));
}

function hexDump(bytes) {
  const lines = [];
  const n = Math.min(bytes.length, 64 * 1024);
  for (let i = 0; i < n; i += 16) {
    const chunk = bytes.slice(i, i + 16);
    let hex = '', text = '';
    for (let k = 0; k < 16; k++) {
      if (k < chunk.length) {
        const c = chunk.charCodeAt(k);
        hex += c.toString(16).padStart(2, '0') + ' ';
        text += c >= 0x20 && c < 0x7f ? chunk[k] : '.';
      } else hex += '   ';
      if (k === 7) hex += ' ';
    }
    lines.push(i.toString(16).padStart(8, '0') + '  ' + hex + ' |' + text + '|');
  }
  if (bytes.length > n) lines.push('(' + fmtInt(bytes.length - n) + ' more bytes)');
  return lines.join('\n');
}

function matcher(text) {
  const t = text.trim();
  if (!t) return null;
  const re = /^\/(.+)\/([a-z]*)$/.exec(t);
  if (re) {
    try { const r = new RegExp(re[1], re[2].includes('i') ? re[2] : re[2] + 'i'); return s => r.test(s); } catch (_) { /* as text */ }
  }
  const needle = t.toLowerCase();
  return s => s.toLowerCase().includes(needle);
}

function matches(s, m) {
  if (s.direction.value && m.from !== s.direction.value) return false;
  const test = s._test;
  if (!test) return true;
  return test(m.text !== undefined ? m.text : atob(m.base64 || ''));
}

function applyFilter() {
  const s = shown;
  if (!s) return;
  s._test = matcher(s.filter.value);
  let visible = 0;
  for (const row of s.messages) {
    row.hidden = !matches(s, row._m);
    if (!row.hidden) visible++;
    const full = row.nextSibling;
    if (full && full.classList && full.classList.contains('msg-full')) full.hidden = row.hidden;
  }
  s.box.querySelector('.msg-bar').dataset.visible = String(visible);
}

/** The live feed says `id` has new messages: an open tab on it reads them. */
export function arrived(id, websocket) {
  const s = shown;
  if (!s || s.ex.id !== id) return;
  s.ex.websocket = websocket;
  s.state.textContent = stateText(websocket);
  s.compose.hidden = websocket.state !== 'open';
  const count = document.querySelector('[data-test=messages-count]');
  if (count) count.textContent = String(websocket.messages_up + websocket.messages_down);
  if (!s.more) load(gen);
}
