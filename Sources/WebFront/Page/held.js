// The held panel: messages paused at breakpoints, their countdown, and continue (as is or edited) or abort.

import { h, $, clear, toast } from './dom.js';
import { fmtTime, fmtAgo, heldCountdown } from './util.js';
import { api } from './api.js';
import { S } from './store.js';

const heldPanel = $('#held-panel');
const heldRaw = $('#held-raw');
const heldGutter = $('#held-gutter');
let heldSel = null;        // id of the held message in the editor
let heldOriginal = '';     // its raw text as shown (LF line ends)
let heldBadLine = 0;

export function onHeld(list_) {
  S.held = list_;
  const n = list_.length;
  const badge = $('#held-count');
  badge.textContent = String(n);
  badge.classList.toggle('zero', n === 0);
  $('#held-button').classList.toggle('has-held', n > 0);
  if (heldPanel.open) renderHeldList();
}

export function openHeld(id) {
  if (!heldPanel.open) heldPanel.showModal();
  renderHeldList();
  const pick = id !== undefined ? id : heldSel !== null && S.held.some(x => x.id === heldSel) ? heldSel : S.held.length ? S.held[0].id : null;
  if (pick !== null && pick !== heldSel) selectHeld(pick);
  fetchHeld();
}

function renderHeldList() {
  const box = $('#held-list');
  clear(box);
  $('#held-sub').textContent = S.held.length ? S.held.length + ' waiting' : '';
  if (!S.held.length) box.appendChild(h('div', { class: 'held-empty' }, 'Nothing is held. Add breakpoint patterns in Settings; matching messages wait here until you continue or abort them.'));
  for (const m of S.held) {
    box.appendChild(h('div', { class: 'held-item' + (m.id === heldSel ? ' sel' : ''), 'data-held-id': m.id, onclick: () => selectHeld(m.id) },
      h('div', { class: 'hi-top' }, h('span', { class: 'hi-kind ' + m.kind }, m.kind), h('b', null, m.method || ''),
        h('span', { class: 'hi-time', title: m.paused_at }, fmtTime(m.paused_at))),
      h('div', { class: 'hi-url', title: m.url }, m.url || ''),
      heldExpiry(m)));
  }
  if (heldSel !== null && !S.held.some(x => x.id === heldSel)) {
    // Resolved elsewhere (CLI, another tab) or timed out.
    $('#held-info').textContent = 'This message is no longer held (continued elsewhere or timed out).';
    heldRaw.disabled = true;
    $('#held-continue').disabled = true;
    $('#held-abort').disabled = true;
  }
}

/** When a held message goes on by itself, from its `expires_at` (null: it waits until resolved; absent: nothing said). */
function heldExpiry(m) {
  if (!m || !('expires_at' in m)) return null;
  return h('span', { class: 'hi-expires', 'data-expires': m.expires_at === null ? '' : String(m.expires_at) }, heldCountdown(m.expires_at));
}
setInterval(() => {
  if (!heldPanel.open) return;
  for (const el of document.querySelectorAll('#held-panel .hi-expires')) el.textContent = heldCountdown(el.getAttribute('data-expires') || null);
}, 1000);

function selectHeld(id) {
  const m = S.held.find(x => x.id === id);
  if (!m) return;
  heldSel = id;
  const isMessage = String(m.kind).startsWith('message_');
  heldOriginal = isMessage ? (m.raw || '') : (m.raw || '').replace(/\r\n/g, '\n');
  heldRaw.value = heldOriginal;
  // A binary message is continued or dropped here; its bytes are edited with `busymate breakpoints continue --raw-file`.
  heldRaw.disabled = !!m.binary;
  $('#held-continue').disabled = false;
  $('#held-abort').disabled = false;
  const expiry = heldExpiry(m);
  const what = { request: 'Request', response: 'Response', message_from_client: 'WebSocket message from the client (Abort drops it)',
    message_from_server: 'WebSocket message from the server (Abort drops it)' }[m.kind] || m.kind;
  clear($('#held-info')).append(h('b', null, what), ' held ', fmtAgo(m.paused_at),
    expiry ? ' · ' : '', expiry || '', ' · ', h('span', { class: 'mono' }, (m.method || '') + ' ' + (m.url || '')));
  setHeldError(null);
  renderHeldList();
  updateGutter();
  heldEdited();
}

function updateGutter() {
  const lines = heldRaw.value.split('\n').length;
  clear(heldGutter);
  const frag = document.createDocumentFragment();
  for (let k = 1; k <= Math.min(lines, 20000); k++) {
    frag.appendChild(h('div', { class: k === heldBadLine ? 'bad' : null }, String(k)));
  }
  heldGutter.appendChild(frag);
  heldGutter.scrollTop = heldRaw.scrollTop;
}

function heldEdited() {
  const edited = heldRaw.value !== heldOriginal;
  $('#held-edited').textContent = edited ? 'Edited — Continue sends your version' : 'Unchanged — Continue sends it as is';
  return edited;
}

function setHeldError(msg, line) {
  const box = $('#held-error');
  heldBadLine = line || 0;
  box.hidden = !msg;
  box.textContent = msg ? (line ? 'line ' + line + ': ' : '') + msg : '';
  updateGutter();
  if (line) {
    heldRaw.scrollTop = Math.max(0, (line - 3) * 18);
    const lines = heldRaw.value.split('\n');
    const start = lines.slice(0, line - 1).reduce((a, l) => a + l.length + 1, 0);
    heldRaw.focus();
    heldRaw.setSelectionRange(start, start + (lines[line - 1] || '').length);
  }
}

heldRaw.addEventListener('input', () => { updateGutter(); heldEdited(); });
heldRaw.addEventListener('scroll', () => { heldGutter.scrollTop = heldRaw.scrollTop; });

/** The edited text as HTTP: CRLF in the head; the body keeps LF unless the original used CRLF. */
function toWire(text, original) {
  const cut = text.indexOf('\n\n');
  const head = cut < 0 ? text : text.slice(0, cut);
  const body = cut < 0 ? '' : text.slice(cut + 2);
  const origBody = (original || '').split('\r\n\r\n').slice(1).join('\r\n\r\n');
  const crlfBody = origBody.includes('\r\n');
  return head.replace(/\n/g, '\r\n') + (cut < 0 ? '\r\n\r\n' : '\r\n\r\n' + (crlfBody ? body.replace(/\n/g, '\r\n') : body));
}

async function resolveHeld(action) {
  if (heldSel === null) return;
  const m = S.held.find(x => x.id === heldSel);
  const payload = { action };
  // A WebSocket message is its payload as typed; an HTTP message goes back to the wire's line ends.
  const isMessage = m && String(m.kind).startsWith('message_');
  if (action === 'continue' && heldEdited()) payload.raw = isMessage ? heldRaw.value : toWire(heldRaw.value, m && m.raw);
  const btns = [$('#held-continue'), $('#held-abort')];
  btns.forEach(b => { b.disabled = true; });
  try {
    await api('POST', '/api/held/' + heldSel, payload);
  } catch (e) {
    btns.forEach(b => { b.disabled = false; });
    if (e.status === 422) setHeldError(e.data.error || e.message, e.data.line);
    else setHeldError(e.message);
    return;
  }
  const done = heldSel;
  S.held = S.held.filter(x => x.id !== done);
  onHeld(S.held);
  heldSel = null;
  heldRaw.value = '';
  heldRaw.disabled = true;
  $('#held-info').textContent = action === 'abort' ? 'Aborted.' : 'Continued.';
  setHeldError(null);
  toast(action === 'abort' ? 'Aborted' : payload.raw ? 'Continued with your edit' : 'Continued');
  if (S.held.length) selectHeld(S.held[0].id);
  else renderHeldList();
}
$('#held-continue').addEventListener('click', () => resolveHeld('continue'));
$('#held-abort').addEventListener('click', () => resolveHeld('abort'));
$('#held-button').addEventListener('click', () => openHeld());

/** Ask for the held list (the feed sends it too; this catches up after a gap). */
export function fetchHeld() {
  api('GET', '/api/held').then(r => onHeld(r.held || [])).catch(() => {});
}
