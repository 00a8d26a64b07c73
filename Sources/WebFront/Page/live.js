// The live feed: the /api/live WebSocket, its reconnects, and what its messages do to the list.

import { S, dropRows } from './store.js';
import { list, atTop, atBottom, scrollToEnd, updatePill, updateEmpty } from './list.js';
import { reload, emptyForBadFilter, catchUp } from './paging.js';
import { showInputError } from './filter.js';
import { highlightLive } from './highlight.js';
import { arrived } from './messages.js';
import { close as closeDetail } from './detail.js';
import { fetchHeld, onHeld } from './held.js';
import { setLive, updateStatusbar } from './statusbar.js';
import { onStatus } from './statusfeed.js';

/** Apply a change that adds/removes `delta` items above every stored row, keeping the view still. */
function structural(delta, addedStored) {
  if (S.newestFirst) {
    if (!atTop()) {
      if (delta) list.shiftBy(delta);
      if (addedStored > 0) S.newCount += addedStored;
    }
    list.refresh(false);
  } else {
    const follow = atBottom();
    list.refresh(false);
    if (follow) scrollToEnd();
    else if (addedStored > 0) S.newCount += addedStored;
  }
  updatePill();
  updateEmpty();
  updateStatusbar();
}

export function onAdded(rows) {
  if (S.filterBad) return;
  // Rows that arrive before the first page answered are kept too: reload() keeps the
  // ones newer than its page and drops the rest.
  const before = S.inflight.length + S.head.length;
  let added = 0;
  for (const r of rows) {           // oldest first
    if (S.ids.has(r.id)) continue;
    r._gen = S.gen;
    S.head.push(r);
    S.ids.set(r.id, r);
    S.maxId = Math.max(S.maxId, r.id);
    rememberReq(r.request_id);
    if (S.sel === 'r' + r.request_id) S.sel = 's' + r.id;
    added++;
  }
  if (!added) return;
  S.inflight = S.inflight.filter(e => !S.seenReq.has(e.request_id));
  structural(S.inflight.length + S.head.length - before, added);
  if (S.highlight.trim()) highlightLive();
}

/** New WebSocket messages: the sockets' rows show their counts, an open Messages tab reads them. */
function onMessages(sockets) {
  let changed = false;
  for (const s of sockets) {
    const r = S.ids.get(s.id);
    if (r) { r.websocket = s.websocket; changed = true; }
    if (s.websocket.state === 'closed' && r && r.duration_ms === null) r.duration_ms = Date.parse(s.websocket.closed_at) - Date.parse(r.started_at);
    arrived(s.id, s.websocket);
  }
  if (changed) list.refresh(true);
}

function rememberReq(id) {
  if (!id) return;
  S.seenReq.add(id);
  if (S.seenReq.size > 20000) {
    const it = S.seenReq.values();
    for (let k = 0; k < 5000; k++) S.seenReq.delete(it.next().value);
  }
}

function onOpen(entries) {
  const before = S.inflight.length;
  S.inflight = (entries || [])
    .filter(e => !S.seenReq.has(e.request_id))
    .map(e => Object.assign({ _open: true }, e))
    .sort((a, b) => (a.started_at < b.started_at ? 1 : a.started_at > b.started_at ? -1 : 0));
  if (!S.started) return;
  structural(S.inflight.length - before, 0);
}

export function sendFilter() {
  if (S.ws && S.ws.readyState === WebSocket.OPEN) S.ws.send(JSON.stringify({ type: 'filter', filter: S.filter }));
}

let reconnectTimer = 0;
let countdownTimer = 0;
export function connect() {
  clearTimeout(reconnectTimer);
  clearInterval(countdownTimer);
  setLive('connecting');
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/live';
  let ws;
  try { ws = new WebSocket(url); } catch (e) { scheduleReconnect(); return; }
  S.ws = ws;
  ws.addEventListener('open', () => {
    S.backoff = 500;
    setLive('live');
    sendFilter();
  });
  ws.addEventListener('message', ev => {
    let m;
    try { m = JSON.parse(ev.data); } catch (_) { return; }
    onMessage(m);
  });
  ws.addEventListener('close', () => {
    if (S.ws !== ws) return;
    S.ws = null;
    if (S.inflight.length) onOpen([]);
    scheduleReconnect();
  });
}

function scheduleReconnect() {
  // A socket that keeps failing may mean the session ended: any API call answers 401
  // then, and api() sends the page to /login.
  if (S.backoff >= 2000) fetchHeld();
  const wait = S.backoff * (0.8 + Math.random() * 0.4);
  S.backoff = Math.min(S.backoff * 2, 15000);
  S.reconnectAt = Date.now() + wait;
  const tick = () => {
    const s = Math.ceil((S.reconnectAt - Date.now()) / 1000);
    setLive('down', s > 1 ? ' in ' + s + ' s' : '');
  };
  tick();
  clearInterval(countdownTimer);
  countdownTimer = setInterval(tick, 1000);
  reconnectTimer = setTimeout(connect, wait);
}

function onMessage(m) {
  switch (m.type) {
    case 'hello':
      if (S.everHello && S.started && m.last_id > S.maxId) catchUp();
      S.everHello = true;
      break;
    case 'added': onAdded(m.exchanges || []); break;
    case 'open': onOpen(m.entries || []); break;
    case 'held': onHeld(m.held || []); break;
    case 'status': onStatus(m.status); break;
    case 'messages': onMessages(m.sockets || []); break;
    case 'cleared':
      closeDetail();
      dropRows();
      reload();
      break;
    case 'error':
      showInputError('filter', m.error, m.position);
      if (S.filter.trim()) { emptyForBadFilter(); updateEmpty(); }
      break;
    default: break;
  }
}
