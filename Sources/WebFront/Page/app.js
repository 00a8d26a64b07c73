// Busymate page: the traffic list (virtual, keyset-paged), the live feed, filter and
// highlight, keyboard, held panel, compose/resend, sessions menu, view switching and
// the status bar. detail.js renders the detail pane, settings.js the Settings and
// Status views.
'use strict';

(function () {
  const { h, $, $$, api, qs, clear } = BM;
  const ROW_H = 22;
  const PAGE = 200;          // rows per keyset page
  const EDGE = 80;           // load the next page when this close to the end of what is loaded

  // ---------------------------------------------------------------- state
  const S = {
    filter: '',
    highlight: '',
    newestFirst: true,
    // Stored rows, split so that both a live prepend and a page append are O(1):
    // head = rows from the live feed, oldest first (the newest is head[head.length-1]);
    // body = rows from /api/exchanges pages, newest first.
    head: [],
    body: [],
    ids: new Map(),          // id -> row, for every loaded row
    next: null,              // keyset cursor for the next page (null: at the end)
    started: false,          // first page answered at least once
    loading: false,
    loadingFirst: false,
    gen: 0,                  // bumped on every filter change; stale answers are dropped
    inflight: [],            // in-flight entries from ws "open" (newest first), minus stored ones
    seenReq: new Set(),      // request_ids of stored rows (so a late "open" does not resurrect them)
    sel: null,               // selected row key: 's<id>' or 'r<request_id>'
    hl: new Set(),           // ids matching the highlight filter
    hlGen: 0,
    hlNext: null,
    hlLast: null,
    hlBusy: false,
    held: [],
    status: null,
    rps: [],                 // requests_per_second of the last 60 ws status messages
    newCount: 0,
    ws: null,
    live: 'connecting',
    backoff: 500,
    reconnectAt: 0,
    everHello: false,
    maxId: 0,
  };
  BM.state = S;

  const storedCount = () => S.head.length + S.body.length;
  /** Stored row j in newest-first order. */
  function storedAt(j) {
    const hl = S.head.length;
    return j < hl ? S.head[hl - 1 - j] : S.body[j - hl];
  }
  const count = () => S.inflight.length + storedCount();
  function itemAt(i) {
    const nIn = S.inflight.length;
    if (S.newestFirst) return i < nIn ? S.inflight[i] : storedAt(i - nIn);
    const n = storedCount();
    return i < n ? storedAt(n - 1 - i) : S.inflight[nIn - 1 - (i - n)];
  }
  const keyOf = item => (item._open ? 'r' + item.request_id : 's' + item.id);
  const keyAt = i => keyOf(itemAt(i));

  // ---------------------------------------------------------------- list rendering
  const scrollEl = $('#list-scroll');
  const bodyEl = $('#list-body');
  const COLS = ['c-id', 'c-time', 'c-device', 'c-method', 'c-status', 'c-host', 'c-path', 'c-type', 'c-size', 'c-dur', 'c-tls', 'c-marks'];
  const listPane = $('#list-pane');

  function createRow() {
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
  function showDeviceColumn(on) {
    if (on && !listPane.classList.contains('with-device')) listPane.classList.add('with-device');
  }

  function fillRow(el, i) {
    const it = itemAt(i);
    const c = el._c;
    if (it._open) {
      el.removeAttribute('data-id');
      el.setAttribute('data-request-id', it.request_id);
      el.className = 'row row-grid open';
      const [host, path] = BM.splitUrl(it.url);
      setText(c.id, '');
      setText(c.time, BM.fmtTime(it.started_at));
      setText(c.device, it.device || '', it.device ? 'device ' + it.device : null);
      setText(c.method, it.method || '');
      c.status.className = 'c-status st pending';
      setText(c.status, it.held ? 'held' : '…', it.held ? 'held at a breakpoint' : 'in flight');
      const shownHost = BM.hostWithPort(it.url, null) || host;
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
      r._t = BM.fmtTime(r.started_at);
      r._dns = BM.dnsInfo(r);
      const parts = BM.splitUrl(r.url);
      r._host = r._dns ? r._dns.name : BM.hostWithPort(r.url, r.host);
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
      c.status.className = 'c-status st ' + BM.statusClass(r.status);
      setText(c.status, String(r.status));
    }
    setText(c.host, r._host, r._hostTitle);
    setText(c.path, r._path, r.url);
    const ws = r.websocket;
    if (ws) {
      // A WebSocket: its messages for a size, open until it closes.
      const n = ws.messages_up + ws.messages_down;
      setText(c.type, 'ws', 'WebSocket' + (ws.extensions ? ' · ' + ws.extensions : ''));
      setText(c.size, BM.fmtInt(n) + ' msg', ws.messages_up + ' client → server, ' + ws.messages_down + ' server → client');
      setText(c.dur, ws.state === 'open' ? 'open' : BM.fmtDur(r.duration_ms), ws.state === 'open' ? 'the socket is open' : null);
    } else {
      setText(c.type, dns ? 'dns' : BM.shortType(r.response_content_type), dns ? 'DNS query ' + dns.type : r.response_content_type || null);
      setText(c.size, r.status === null && !r.response_size ? '' : BM.fmtSize(r.response_size),
        'response ' + BM.fmtInt(r.response_size) + ' B' + (r.request_size ? ' · request ' + BM.fmtInt(r.request_size) + ' B' : ''));
      setText(c.dur, BM.fmtDur(r.duration_ms));
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

  function decorate(el, i, key) {
    const it = el._item;
    el.classList.toggle('odd', i % 2 === 1);
    el.classList.toggle('sel', key === S.sel);
    el.classList.toggle('hl', !it._open && S.hl.has(it.id));
  }

  const list = new VirtualList(scrollEl, bodyEl, {
    rowHeight: ROW_H,
    count,
    keyAt,
    itemAt,
    create: createRow,
    fill: fillRow,
    decorate,
    onRange: onRange,
  });
  BM.list = list;

  function onRange(first, last, n) {
    // Keyset paging: ask for the next (older) page when the view nears the oldest loaded row.
    if (S.started && S.next !== null && !S.loading) {
      const nearEnd = S.newestFirst ? last >= n - EDGE : first <= EDGE;
      if (nearEnd) loadMore();
    }
    updateEmpty();
    updatePill();
  }

  // ---------------------------------------------------------------- paging
  /** Replace the list with the first page for the current filter (one request). */
  async function reload() {
    const gen = ++S.gen;
    const f = S.filter;
    S.filterBad = false;
    sendFilter();
    S.loading = true;
    S.loadingFirst = true;
    updateEmpty();
    let res;
    try {
      res = await api('GET', '/api/exchanges' + qs({ filter: f, limit: PAGE }));
    } catch (e) {
      if (gen !== S.gen) return;
      S.loading = false;
      S.loadingFirst = false;
      if (e.status === 400) {
        showInputError('filter', e.data.error || e.message, e.data.position);
        emptyForBadFilter();
      } else BM.toast('Could not load the list: ' + e.message, true);
      updateEmpty();
      return;
    }
    if (gen !== S.gen) return;
    showInputError('filter', null);
    const rows = res.exchanges || [];
    const pageIds = new Set(rows.map(r => r.id));
    // Rows the live feed delivered after this filter was sent, and newer than the page, stay.
    const top = rows.length ? rows[0].id : 0;
    S.head = S.head.filter(r => r._gen === gen && !pageIds.has(r.id) && r.id > top);
    S.body = rows;
    S.ids = new Map();
    for (const r of S.head) S.ids.set(r.id, r);
    for (const r of rows) { S.ids.set(r.id, r); S.maxId = Math.max(S.maxId, r.id); }
    S.next = res.next === undefined ? null : res.next;
    S.loading = false;
    S.loadingFirst = false;
    S.started = true;
    S.newCount = 0;
    if (S.newestFirst) scrollEl.scrollTop = 0;
    list.refresh(true);
    if (!S.newestFirst) scrollToEnd();
    refreshHighlight();
    updateStatusbar();
  }

  /** A filter the API refused selects nothing: the rows of the last good one would pass for its answer. */
  function emptyForBadFilter() {
    S.filterBad = true;
    S.head = []; S.body = []; S.ids = new Map(); S.next = null; S.newCount = 0;
    S.started = true;
    list.refresh(true);
    updatePill();
    updateStatusbar();
  }

  async function loadMore() {
    if (S.loading || S.next === null) return;
    const gen = S.gen;
    S.loading = true;
    let res;
    try {
      res = await api('GET', '/api/exchanges' + qs({ filter: S.filter, before: S.next, limit: PAGE }));
    } catch (e) {
      if (gen === S.gen) {
        S.loading = false;
        BM.toast('Could not load more rows: ' + e.message, true);
      }
      return;
    }
    if (gen !== S.gen) return;
    let added = 0;
    for (const r of res.exchanges || []) {
      if (S.ids.has(r.id)) continue;
      S.ids.set(r.id, r);
      S.body.push(r);
      added++;
    }
    S.next = res.next === undefined ? null : res.next;
    S.loading = false;
    // Oldest first shows older rows at the top: keep what the user looks at still.
    if (!S.newestFirst && added) list.shiftBy(added);
    list.refresh(false);
    ensureHighlight();
    updateStatusbar();
  }

  // ---------------------------------------------------------------- live changes
  const atTop = () => scrollEl.scrollTop < ROW_H / 2;
  const atBottom = () => scrollEl.scrollTop + scrollEl.clientHeight >= scrollEl.scrollHeight - ROW_H;

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

  function onAdded(rows) {
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
      BM.messages.arrived(s.id, s.websocket);
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

  function scrollToEnd() {
    scrollEl.scrollTop = scrollEl.scrollHeight;
    list.render();
  }

  const pill = $('#new-pill');
  function updatePill() {
    if (S.newestFirst ? atTop() : atBottom()) S.newCount = 0;
    pill.hidden = S.newCount <= 0;
    if (!pill.hidden) {
      pill.querySelector('.n').textContent = S.newCount.toLocaleString('en-US');
      pill.firstChild.textContent = S.newestFirst ? '↑ ' : '↓ ';
    }
  }
  pill.addEventListener('click', () => {
    S.newCount = 0;
    if (S.newestFirst) { scrollEl.scrollTop = 0; list.render(); } else scrollToEnd();
    updatePill();
  });

  function updateEmpty() {
    const empty = count() === 0 && S.started && !S.loadingFirst;
    $('#empty-state').hidden = !(empty && !S.filter.trim());
    $('#empty-filter').hidden = !(empty && !!S.filter.trim());
    $('#empty-filter .empty-title').textContent = S.filterBad ? 'The filter is not valid' : 'Nothing matches the filter';
    $('#empty-filter p').textContent = S.filterBad ? 'Fix it (the error is under the filter box) or clear it to see the list.' : 'New exchanges that match will appear here live.';
  }

  // ---------------------------------------------------------------- selection
  function indexOfKey(key) {
    if (!key) return -1;
    const el = list.shown.get(key);
    if (el && el._key === key) return el._i;
    const n = count();
    for (let i = 0; i < n; i++) if (keyAt(i) === key) return i;
    return -1;
  }

  const detailSoon = BM.debounce(() => openSelected(), 90);

  function select(key, opts) {
    S.sel = key;
    list.refresh(false);
    if (opts && opts.scroll) {
      const i = indexOfKey(key);
      if (i >= 0) list.scrollToIndex(i, opts.center ? 'center' : undefined);
    }
    if (opts && opts.open) openSelected();
    else if (BM.detail.isOpen()) detailSoon();
  }

  function openSelected() {
    if (!S.sel) return;
    if (S.sel[0] === 's') BM.detail.open(Number(S.sel.slice(1)));
    else {
      const e = S.inflight.find(x => 'r' + x.request_id === S.sel);
      if (e) BM.detail.showInflight(e);
    }
  }

  function move(delta) {
    const n = count();
    if (!n) return;
    let i = indexOfKey(S.sel);
    if (i < 0) i = delta > 0 ? Math.max(list.first - 1, -1) : Math.min(list.last + 1, n);
    i = Math.max(0, Math.min(n - 1, i + delta));
    select(keyAt(i), { scroll: true });
  }

  /** Select a stored row by id if it is loaded (for "↻ from #N" links). */
  function selectId(id) {
    const key = 's' + id;
    if (!S.ids.has(Number(id))) {
      BM.toast('#' + id + ' is not loaded in the list (scroll further, or it is filtered out)');
      BM.detail.open(Number(id));
      return;
    }
    select(key, { scroll: true, center: true, open: true });
  }

  bodyEl.addEventListener('click', ev => {
    const origin = ev.target.closest('.chip.resent');
    if (origin) {
      ev.stopPropagation();
      selectId(Number(origin.getAttribute('data-origin')));
      return;
    }
    const row = ev.target.closest('.row');
    if (!row || !row._key) return;
    scrollEl.focus({ preventScroll: true });
    select(row._key, { open: true });
  });

  // ---------------------------------------------------------------- filter + highlight inputs
  const filterEl = $('#filter');
  const hlEl = $('#highlight');
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
  function showInputError(which, msg, position) {
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

  function applyFilterInput() {
    const v = filterEl.value;
    filterEl.classList.toggle('active', !!v.trim());
    $('#filter-clear').hidden = !v;
    if (v === S.filter && S.started) return;
    S.filter = v;
    writeHash();
    reload();
  }
  const filterSoon = BM.debounce(applyFilterInput, 250);
  filterEl.addEventListener('input', () => { $('#filter-clear').hidden = !filterEl.value; filterSoon(); });
  filterEl.addEventListener('keydown', ev => {
    if (ev.key === 'Enter') { filterSoon.cancel(); S.started && filterEl.value === S.filter ? reload() : applyFilterInput(); }
    else if (ev.key === 'Escape') { filterEl.blur(); scrollEl.focus(); }
    else if (ev.key === 'ArrowDown') { ev.preventDefault(); scrollEl.focus(); move(1); }
  });
  $('#filter-clear').addEventListener('click', () => { filterEl.value = ''; filterSoon.cancel(); applyFilterInput(); filterEl.focus(); });

  function applyHighlightInput() {
    const v = hlEl.value;
    hlEl.classList.toggle('active', !!v.trim());
    if (v === S.highlight) return;
    S.highlight = v;
    writeHash();
    refreshHighlight();
  }
  const hlSoon = BM.debounce(applyHighlightInput, 250);
  hlEl.addEventListener('input', hlSoon);
  hlEl.addEventListener('keydown', ev => {
    if (ev.key === 'Enter') { hlSoon.cancel(); applyHighlightInput(); }
    else if (ev.key === 'Escape') { hlEl.blur(); scrollEl.focus(); }
  });

  // Highlight. The API has one filter per query and no id-range operator, so the page
  // asks for rows matching "(filter) & (highlight)" — newest first, 500 at a time — and
  // marks the loaded rows whose ids come back. It keeps paging the highlight query only
  // while its results are still inside the loaded range (so a long scroll stays marked),
  // and re-asks for the newest 100 when live rows arrive. Limitation: a highlight match
  // outside what those queries return (e.g. an in-flight row) is not marked.
  function highlightQuery() {
    const f = S.filter.trim();
    const hq = S.highlight.trim();
    return { text: f ? '(' + f + ') & (' + hq + ')' : hq, offset: f ? ('(' + f + ') & (').length : 0 };
  }

  async function hlFetch(gen, before, limit) {
    const q = highlightQuery();
    let res;
    try {
      res = await api('GET', '/api/exchanges' + qs({ filter: q.text, before, limit }));
    } catch (e) {
      if (gen !== S.hlGen) return false;
      if (e.status === 400) {
        const p = e.data.position;
        showInputError('highlight', e.data.error || e.message, typeof p === 'number' && p > q.offset ? p - q.offset : null);
      }
      return false;
    }
    if (gen !== S.hlGen) return false;
    showInputError('highlight', null);
    const rows = res.exchanges || [];
    for (const r of rows) S.hl.add(r.id);
    if (before !== undefined || S.hlLast === null) {
      S.hlNext = res.next === undefined ? null : res.next;
      S.hlLast = rows.length ? rows[rows.length - 1].id : S.hlLast;
    }
    list.refresh(false);
    updateStatusbar();
    return true;
  }

  async function refreshHighlight() {
    const gen = ++S.hlGen;
    S.hl = new Set();
    S.hlNext = null;
    S.hlLast = null;
    if (!S.highlight.trim()) {
      showInputError('highlight', null);
      list.refresh(false);
      updateStatusbar();
      return;
    }
    if (await hlFetch(gen, undefined, 500)) ensureHighlight();
  }

  async function ensureHighlight() {
    if (S.hlBusy || !S.highlight.trim()) return;
    S.hlBusy = true;
    const gen = S.hlGen;
    try {
      for (let k = 0; k < 50 && gen === S.hlGen && S.hlNext !== null && S.hlLast !== null && S.ids.has(S.hlLast); k++) {
        if (!(await hlFetch(gen, S.hlNext, 500))) break;
      }
    } finally { S.hlBusy = false; }
  }

  const highlightLive = BM.debounce(() => { if (S.highlight.trim()) hlFetch(S.hlGen, undefined, 100); }, 700);

  // ---------------------------------------------------------------- filter help
  const HELP = [
    ['~d DOMAIN', 'domain (host) contains'], ['~u REGEX', 'URL'], ['~m METHOD', 'method, e.g. ~m POST'],
    ['~c CODE', 'status: 404, 4xx, 200-299'], ['~h TEXT', 'request or response header'], ['~hq TEXT', 'request header'],
    ['~hs TEXT', 'response header'], ['~b TEXT', 'request or response body'], ['~bq TEXT', 'request body'],
    ['~bs TEXT', 'response body'], ['~t TYPE', 'content type, e.g. ~t json'], ['~e', 'exchange ended with an error'],
    ['~src ADDR', 'client address'], ['~dst ADDR', 'server address'], ['~websocket', 'WebSocket upgrades'],
    ['~device NAME', 'from the device (its name, a regex)'], ['~dns', 'DNS queries (transparent mode)'],
    ['~tls MODE', 'mitm | passthrough | none'], ['~proto h2', 'HTTP version: h1 (1.0, 1.1) | h2'], ['~grpc', 'gRPC calls'],
    ['~rule NAME', 'a rule applied'], ['~marked', 'marked (★ in the detail)'], ['~marker TEXT', 'marked with this marker'],
    ['~comment TEXT', 'a comment contains'], ['~s', 'has a response'], ['~q', 'no response'], ['~a', 'asset: JS, CSS, image, font'],
    ['~http', 'HTTP exchanges'], ['~tcp', 'passed-through TCP tunnels'], ['~replay', 'sent again (resend)'],
    ['~since 10m', 'started since (10m, 2h, 1d, a time)'], ['!X', 'not'], ['X & Y', 'and (a space also means and)'], ['X | Y', 'or'],
    ['( … )', 'grouping'], ['word', 'a bare word matches the URL'],
  ];
  const helpRows = $('#filter-help-rows');
  for (const [op, desc] of HELP) {
    const tr = h('tr', null, h('td', { title: 'Insert' }, op), h('td', null, desc));
    tr.addEventListener('click', () => {
      const tok = op.split(' ')[0].replace('…', '');
      if (!tok.startsWith('~') && tok !== '!') return;
      const v = filterEl.value;
      filterEl.value = (v && !/\s$/.test(v) ? v + ' ' : v) + tok + (tok === '!' || op.split(' ').length === 1 ? '' : ' ');
      filterEl.focus();
      toggleHelp(false);
    });
    helpRows.appendChild(tr);
  }
  const helpBtn = $('#filter-help-button');
  const helpPop = $('#filter-help');
  function toggleHelp(show) {
    show = show === undefined ? helpPop.hidden : show;
    helpPop.hidden = !show;
    helpBtn.setAttribute('aria-expanded', String(show));
    if (show) {
      const r = filterEl.getBoundingClientRect();
      helpPop.style.left = Math.max(8, Math.min(r.left, window.innerWidth - helpPop.offsetWidth - 8)) + 'px';
      helpPop.style.top = (r.bottom + 6) + 'px';
    }
  }
  helpBtn.addEventListener('click', ev => { ev.stopPropagation(); toggleHelp(); });

  // ---------------------------------------------------------------- WebSocket live feed
  function setLive(state, detail) {
    S.live = state;
    const el = $('#live-state');
    const dot = $('#sb-live .dot');
    const sb = $('#sb-live');
    sb.classList.toggle('down', state === 'down');
    dot.className = 'dot ' + (state === 'live' ? 'green' : state === 'down' ? 'red pulse' : 'amber pulse');
    el.textContent = state === 'live' ? 'live' : state === 'down' ? 'disconnected – reconnecting' + (detail || '') : 'connecting…';
    sb.title = state === 'live' ? 'Live feed connected' : 'Live feed: ' + el.textContent;
  }

  function sendFilter() {
    if (S.ws && S.ws.readyState === WebSocket.OPEN) S.ws.send(JSON.stringify({ type: 'filter', filter: S.filter }));
  }

  let reconnectTimer = 0;
  let countdownTimer = 0;
  function connect() {
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
    // then, and BM.api sends the page to /login.
    if (S.backoff >= 2000) api('GET', '/api/held').then(r => onHeld(r.held || [])).catch(() => {});
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
        BM.detail.close();
        S.head = []; S.body = []; S.ids = new Map(); S.sel = null;
        reload();
        break;
      case 'error':
        showInputError('filter', m.error, m.position);
        if (S.filter.trim()) { emptyForBadFilter(); updateEmpty(); }
        break;
      default: break;
    }
  }

  /** After a reconnect: fetch what the feed missed (no after= in the API: take the first page). */
  async function catchUp() {
    const gen = S.gen;
    let res;
    try { res = await api('GET', '/api/exchanges' + qs({ filter: S.filter, limit: 500 })); } catch (_) { return; }
    if (gen !== S.gen) return;
    const rows = res.exchanges || [];
    const fresh = [];
    let touched = false;
    for (const r of rows) {
      if (S.ids.has(r.id)) { touched = true; break; }
      fresh.push(r);
    }
    if (!touched && res.next !== null && storedCount()) { reload(); return; }   // missed more than a page
    onAdded(fresh.reverse());
  }

  // ---------------------------------------------------------------- status bar
  function onStatus(st) {
    if (!st) return;
    S.status = st;
    const rps = st.counters && typeof st.counters.requests_per_second === 'number' ? st.counters.requests_per_second : 0;
    S.rps.push(rps);
    if (S.rps.length > 60) S.rps.shift();
    updateStatusbar();
    updateSettingsBanner();
    if (currentView === 'status') BM.statusView.render(S.status, S.rps);
    if (currentView === 'devices') BM.devicesView.render(S.status);
    updateDevicesBadge();
    updateEmptyCommand();
  }

  /** The Devices tab counts the devices online; the list gains its Device column once any is known. */
  function updateDevicesBadge() {
    const devs = (S.status && S.status.devices) || [];
    const online = devs.filter(d => d.online).length;
    const badge = $('#devices-badge');
    badge.hidden = !devs.length;
    badge.textContent = String(online);
    badge.classList.toggle('zero', online === 0);
    badge.title = online + ' of ' + devs.length + ' online';
    if (devs.length) showDeviceColumn(true);
  }

  /** From the Devices view: the list, filtered to one device. */
  function showDevice(name) {
    filterEl.value = BM.deviceFilter(name);
    filterSoon.cancel();
    setView('traffic');
    applyFilterInput();
    scrollEl.focus({ preventScroll: true });
  }

  /** From the status view: the list with a filter (e.g. ~dns). */
  function showFilter(text) {
    filterEl.value = text;
    filterSoon.cancel();
    setView('traffic');
    applyFilterInput();
  }

  function updateStatusbar() {
    const st = S.status;
    if (st) {
      // The Status view's verdict, from the same function: the two never disagree.
      const r = BM.statusView.readiness(st);
      const item = $('#sb-tunnel');
      item.setAttribute('data-state', r.state);
      item.title = 'tunnel ' + ((st.tunnel && st.tunnel.state) || 'unknown') + ' · the Status view says why';
      $('#sb-tunnel .dot').className = 'dot ' + r.state;
      $('#sb-tunnel .t').textContent = r.headline;
      const rps = st.counters && st.counters.requests_per_second;
      $('#sb-rps').textContent = (typeof rps === 'number' ? rps.toFixed(rps < 10 ? 1 : 0) : '—') + ' req/s';
      $('#sb-stored').textContent = BM.fmtInt(st.store && st.store.exchanges) + ' stored';
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

  /** settings.json that does not parse: said on every view from the first status, not only on a save. */
  function updateSettingsBanner() {
    const se = S.status && S.status.settings;
    const el = $('#settings-banner');
    const bad = !!se && se.valid === false;
    el.hidden = !bad;
    if (!bad) return;
    const text = BM.settingsProblem(se.error) + ' The last good settings stay in force and proxying goes on with them; fix the file to apply a change.';
    if (el.querySelector('.msg').textContent !== text) el.querySelector('.msg').textContent = text;
  }
  $('#settings-banner-show').addEventListener('click', () => setView('settings'));

  function updateEmptyCommand() {
    const st = S.status;
    const l = st && st.listeners && st.listeners.find(x => !x.error && (x.bound || x.address));
    if (!l) return;
    let addr = l.bound || l.address;
    addr = addr.replace(/^0\.0\.0\.0:/, '127.0.0.1:').replace(/^\[::\]:/, '127.0.0.1:');
    $('#empty-cmd').textContent = 'curl -x http://' + addr + ' http://example.com/';
    // The group's own ca.pem, as README's quick start has it.
    const ca = st.group ? String(st.group).replace(/\/+$/, '') + '/ca.pem' : 'ca.pem';
    $('#empty-cmd-tls').textContent = 'curl -x http://' + addr + ' --cacert ' + ca + ' https://example.com/';
  }

  // ---------------------------------------------------------------- held panel
  const heldPanel = $('#held-panel');
  const heldRaw = $('#held-raw');
  const heldGutter = $('#held-gutter');
  let heldSel = null;        // id of the held message in the editor
  let heldOriginal = '';     // its raw text as shown (LF line ends)
  let heldBadLine = 0;

  function onHeld(list_) {
    S.held = list_;
    const n = list_.length;
    const badge = $('#held-count');
    badge.textContent = String(n);
    badge.classList.toggle('zero', n === 0);
    $('#held-button').classList.toggle('has-held', n > 0);
    if (heldPanel.open) renderHeldList();
  }

  function openHeld(id) {
    if (!heldPanel.open) heldPanel.showModal();
    renderHeldList();
    const pick = id !== undefined ? id : heldSel !== null && S.held.some(x => x.id === heldSel) ? heldSel : S.held.length ? S.held[0].id : null;
    if (pick !== null && pick !== heldSel) selectHeld(pick);
    api('GET', '/api/held').then(r => onHeld(r.held || [])).catch(() => {});
  }

  function renderHeldList() {
    const box = $('#held-list');
    clear(box);
    $('#held-sub').textContent = S.held.length ? S.held.length + ' waiting' : '';
    if (!S.held.length) box.appendChild(h('div', { class: 'held-empty' }, 'Nothing is held. Add breakpoint patterns in Settings; matching messages wait here until you continue or abort them.'));
    for (const m of S.held) {
      box.appendChild(h('div', { class: 'held-item' + (m.id === heldSel ? ' sel' : ''), 'data-held-id': m.id, onclick: () => selectHeld(m.id) },
        h('div', { class: 'hi-top' }, h('span', { class: 'hi-kind ' + m.kind }, m.kind), h('b', null, m.method || ''),
          h('span', { class: 'hi-time', title: m.paused_at }, BM.fmtTime(m.paused_at))),
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
    return h('span', { class: 'hi-expires', 'data-expires': m.expires_at === null ? '' : String(m.expires_at) }, BM.heldCountdown(m.expires_at));
  }
  setInterval(() => {
    if (!heldPanel.open) return;
    for (const el of document.querySelectorAll('#held-panel .hi-expires')) el.textContent = BM.heldCountdown(el.getAttribute('data-expires') || null);
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
    clear($('#held-info')).append(h('b', null, what), ' held ', BM.fmtAgo(m.paused_at),
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
    BM.toast(action === 'abort' ? 'Aborted' : payload.raw ? 'Continued with your edit' : 'Continued');
    if (S.held.length) selectHeld(S.held[0].id);
    else renderHeldList();
  }
  $('#held-continue').addEventListener('click', () => resolveHeld('continue'));
  $('#held-abort').addEventListener('click', () => resolveHeld('abort'));
  $('#held-button').addEventListener('click', () => openHeld());

  // ---------------------------------------------------------------- compose / resend
  const composeDlg = $('#compose-dialog');
  let composeResendId = null;

  function headerRow(name, value) {
    const row = h('div', { class: 'header-row' },
      h('input', { class: 'header-name', type: 'text', placeholder: 'Name', spellcheck: 'false', value: name || '' }),
      h('input', { class: 'header-value', type: 'text', placeholder: 'Value', spellcheck: 'false', value: value || '' }),
      h('button', { type: 'button', class: 'header-remove', title: 'Remove header', 'aria-label': 'Remove header' }, '×'));
    row.querySelector('.header-remove').addEventListener('click', () => row.remove());
    return row;
  }

  /** Open the dialog: empty (compose), or prefilled from an exchange's detail (resend). */
  function openCompose(ex) {
    composeResendId = ex ? ex.id : null;
    $('#compose-title').textContent = ex ? 'Edit and resend #' + ex.id : 'Compose request';
    $('#send-request').textContent = ex ? 'Resend' : 'Send';
    const req = ex && ex.request;
    const method = (req && req.method) || 'GET';
    const sel = $('#req-method');
    if (![...sel.options].some(o => o.value === method)) sel.appendChild(h('option', null, method));
    sel.value = method;
    $('#req-url').value = (req && req.url) || (ex && ex.url) || '';
    const box = clear($('#req-headers'));
    const headers = req ? (req.headers || []).filter(([n]) => !/^(content-length|transfer-encoding)$/i.test(n)) : [['Accept', '*/*']];
    for (const [n, v] of headers) box.appendChild(headerRow(n, v));
    const body = $('#req-body');
    const b = req && req.body;
    body.disabled = false;
    body.value = '';
    let note = 'Content-Length is set from the body.';
    if (b && (b.kind === 'json' || b.kind === 'text') && typeof b.text === 'string' && !b.text_truncated) body.value = b.text;
    else if (b && b.kind !== 'empty' && b.size) {
      body.disabled = true;
      note = 'The ' + (b.kind || 'binary') + ' body (' + BM.fmtSize(b.decoded_size || b.size) + ') cannot be edited here; "Resend as is" sends it unchanged.';
    }
    $('#req-body-note').textContent = note;
    $('#compose-error').hidden = true;
    $('#curl-import').hidden = !!ex;
    $('#curl-import').open = false;
    $('#curl-text').value = '';
    composeDlg.showModal();
    $('#req-url').focus();
  }

  // Import cURL: the server parses it (one parser for the page and `compose --from-curl`), the form is filled.
  $('#curl-apply').addEventListener('click', async () => {
    const err = $('#compose-error');
    err.hidden = true;
    const command = $('#curl-text').value.trim();
    if (!command) return;
    try {
      const r = await api('POST', '/api/compose/curl', { command });
      const sel = $('#req-method');
      if (![...sel.options].some(o => o.value === r.method)) sel.appendChild(h('option', null, r.method));
      sel.value = r.method;
      $('#req-url').value = r.url;
      const box = clear($('#req-headers'));
      for (const [n, v] of r.headers) box.appendChild(headerRow(n, v));
      const body = $('#req-body');
      body.disabled = false;
      body.value = r.body || '';
      $('#curl-import').open = false;
    } catch (e) {
      err.textContent = BM.describeError(e);
      err.hidden = false;
    }
  });

  $('#add-header').addEventListener('click', () => {
    const row = headerRow('', '');
    $('#req-headers').appendChild(row);
    row.querySelector('.header-name').focus();
  });

  $('#compose-form').addEventListener('submit', async ev => {
    ev.preventDefault();
    const err = $('#compose-error');
    err.hidden = true;
    const method = $('#req-method').value.trim();
    const url = $('#req-url').value.trim();
    if (!url) { err.textContent = 'A URL is required.'; err.hidden = false; $('#req-url').focus(); return; }
    const headers = $$('.header-row', composeDlg)
      .map(r => [r.querySelector('.header-name').value.trim(), r.querySelector('.header-value').value])
      .filter(([n]) => n);
    const payload = { method, url, headers };
    const body = $('#req-body');
    if (!body.disabled) payload.body = body.value;
    const btn = $('#send-request');
    btn.disabled = true;
    try {
      if (composeResendId !== null) await api('POST', '/api/exchanges/' + composeResendId + '/resend', payload);
      else await api('POST', '/api/compose', payload);
    } catch (e) {
      err.textContent = BM.describeError(e);
      err.hidden = false;
      return;
    } finally { btn.disabled = false; }
    composeDlg.close();
    BM.toast('Sent — the new exchange appears in the list');
  });

  async function resendAsIs(id) {
    try {
      await api('POST', '/api/exchanges/' + id + '/resend', {});
      BM.toast('Resent #' + id + ' — the new exchange appears in the list');
    } catch (e) { BM.toast('Resend failed: ' + BM.describeError(e), true); }
  }

  $('#compose').addEventListener('click', () => openCompose(null));

  // Close buttons of every dialog.
  for (const btn of $$('.dlg-close')) btn.addEventListener('click', () => btn.closest('dialog').close());

  // ---------------------------------------------------------------- sessions menu
  const menu = $('#sessions-menu');
  const menuBtn = $('#sessions-button');
  function toggleMenu(show) {
    show = show === undefined ? menu.hidden : show;
    menu.hidden = !show;
    menuBtn.setAttribute('aria-expanded', String(show));
    if (show) $('#export-har').href = '/api/har' + qs({ filter: S.filter.trim() });
  }
  menuBtn.addEventListener('click', ev => { ev.stopPropagation(); toggleMenu(); });
  $('#export-har').addEventListener('click', () => {
    $('#export-har').href = '/api/har' + qs({ filter: S.filter.trim() });
    setTimeout(() => toggleMenu(false), 0);
  });
  $('#import-har').addEventListener('change', async ev => {
    const file = ev.target.files && ev.target.files[0];
    toggleMenu(false);
    if (!file) return;
    BM.toast('Importing ' + file.name + '…');
    try {
      const res = await api('POST', '/api/har', file, { raw: true, contentType: 'application/json' });
      BM.toast('Imported ' + BM.fmtInt(res && res.imported) + ' exchanges from ' + file.name);
      reload();
    } catch (e) {
      BM.toast('Import failed: ' + BM.describeError(e), true);
    } finally { ev.target.value = ''; }
  });
  $('#clear-capture').addEventListener('click', async () => {
    toggleMenu(false);
    const n = S.status && S.status.store ? BM.fmtInt(S.status.store.exchanges) + ' exchanges' : 'every exchange';
    if (!await BM.confirm('Clear the capture?', 'This deletes ' + n + ' and their bodies from the store. It cannot be undone.', 'Clear capture')) return;
    try {
      await api('DELETE', '/api/exchanges', { confirm: true });
      BM.toast('Capture cleared');
      BM.detail.close();
      S.head = []; S.body = []; S.ids = new Map(); S.sel = null;
      reload();
    } catch (e) { BM.toast('Clear failed: ' + BM.describeError(e), true); }
  });

  document.addEventListener('click', ev => {
    if (!menu.hidden && !ev.target.closest('.menu-wrap')) toggleMenu(false);
    if (!helpPop.hidden && !ev.target.closest('#filter-help') && ev.target !== helpBtn) toggleHelp(false);
  });

  // ---------------------------------------------------------------- sort order
  // The API pages newest first only; "oldest first" shows the loaded rows reversed (older
  // pages load when scrolling near the top, live rows append at the bottom and the view
  // follows them while scrolled to the end), not the capture's true oldest rows first.
  const sortBtn = $('#sort-order');
  function setSort(newestFirst, keepSel) {
    S.newestFirst = newestFirst;
    sortBtn.textContent = newestFirst ? '↓ Newest first' : '↑ Oldest first';
    sortBtn.title = newestFirst ? 'Newest first (click for oldest first)' : 'Oldest first among loaded rows (click for newest first)';
    S.newCount = 0;
    list.refresh(true);
    const i = keepSel ? indexOfKey(S.sel) : -1;
    if (i >= 0) list.scrollToIndex(i, 'center');
    else if (newestFirst) { scrollEl.scrollTop = 0; list.render(); } else scrollToEnd();
    localStorage.setItem('bm-sort', newestFirst ? 'newest' : 'oldest');
    updatePill();
  }
  sortBtn.addEventListener('click', () => setSort(!S.newestFirst, true));

  // ---------------------------------------------------------------- views + hash
  let currentView = 'traffic';
  function setView(v, noHash) {
    if (!['traffic', 'devices', 'settings', 'status'].includes(v)) v = 'traffic';
    currentView = v;
    document.body.dataset.currentView = v;
    for (const b of $$('.view-tab')) b.classList.toggle('active', b.dataset.view === v);
    for (const p of $$('.view')) p.classList.toggle('active', p.dataset.viewPanel === v);
    if (v === 'settings') BM.settings.load();
    if (v === 'devices') BM.devicesView.render(S.status);
    if (v === 'status') {
      BM.statusView.render(S.status, S.rps);
      api('GET', '/api/status').then(st => { if (!S.status) onStatus(st); else { S.status = st; BM.statusView.render(S.status, S.rps); } }).catch(() => {});
    }
    if (v === 'traffic') list.render();
    if (!noHash) writeHash();
  }
  for (const b of $$('.view-tab')) b.addEventListener('click', () => setView(b.dataset.view));

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    return { filter: p.get('filter') || '', highlight: p.get('highlight') || '', view: p.get('view') || 'traffic' };
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (currentView !== 'traffic') p.set('view', currentView);
    if (S.filter) p.set('filter', S.filter);
    if (S.highlight) p.set('highlight', S.highlight);
    const s = p.toString();
    history.replaceState(null, '', s ? '#' + s : location.pathname + location.search);
  }
  /** `#/exchange/ID` and `#/device/NAME` (busymate web url --exchange, list --json's links): they only navigate. */
  function deepLink(hash) {
    const m = /^#\/(exchange|device)\/([^?#]+)$/.exec(hash || '');
    if (!m) return null;
    let v;
    try { v = decodeURIComponent(m[2]); } catch (_) { return null; }
    if (m[1] === 'exchange') return /^[0-9]{1,15}$/.test(v) ? { exchange: Number(v) } : null;
    return /^[A-Za-z0-9._:-]{1,64}$/.test(v) ? { device: v } : null;
  }
  let lastDeepLink = null;
  function followDeepLink(link) {
    lastDeepLink = link.exchange ? '#/exchange/' + link.exchange : '#/device/' + encodeURIComponent(link.device);
    if (link.exchange) {
      setView('traffic', true);
      if (S.ids.has(link.exchange)) select('s' + link.exchange, { scroll: true, center: true, open: true });
      else BM.detail.open(link.exchange);
    } else if (link.device) {
      setView('devices', true);
      BM.devicesView.focus(link.device);
    }
    writeHash();
  }
  window.addEventListener('hashchange', () => {
    const link = deepLink(location.hash);
    if (link) { followDeepLink(link); return; }
    const st = readHash();
    if (st.view !== currentView) setView(st.view, true);
    if (st.filter !== S.filter) { filterEl.value = st.filter; applyFilterInput(); }
    if (st.highlight !== S.highlight) { hlEl.value = st.highlight; applyHighlightInput(); }
  });

  // ---------------------------------------------------------------- keyboard
  const anyDialogOpen = () => $$('dialog').some(d => d.open);
  document.addEventListener('keydown', ev => {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (anyDialogOpen()) return;   // <dialog> handles Esc itself
    const t = ev.target;
    const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
    if (ev.key === 'Escape') {
      if (!helpPop.hidden) { toggleHelp(false); return; }
      if (!menu.hidden) { toggleMenu(false); return; }
      if (typing) { t.blur(); return; }
      if (currentView === 'traffic' && BM.detail.isOpen()) { BM.detail.close(); scrollEl.focus(); }
      return;
    }
    if (typing) return;
    if (ev.key === '/') { ev.preventDefault(); if (currentView !== 'traffic') setView('traffic'); filterEl.focus(); filterEl.select(); return; }
    if (currentView !== 'traffic') return;
    if (t && t.closest && t.closest('#detail') && (ev.key === 'ArrowUp' || ev.key === 'ArrowDown')) return;  // let the pane scroll
    switch (ev.key) {
      case 'ArrowDown': case 'j': ev.preventDefault(); move(1); break;
      case 'ArrowUp': case 'k': ev.preventDefault(); move(-1); break;
      case 'PageDown': ev.preventDefault(); move(list.rowsPerPage()); break;
      case 'PageUp': ev.preventDefault(); move(-list.rowsPerPage()); break;
      case 'Home': ev.preventDefault(); if (count()) select(keyAt(0), { scroll: true }); break;
      case 'End': ev.preventDefault(); if (count()) select(keyAt(count() - 1), { scroll: true }); break;
      case 'Enter': if (S.sel) { ev.preventDefault(); openSelected(); } break;
      default: break;
    }
  });

  // ---------------------------------------------------------------- splitter
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

  // ---------------------------------------------------------------- theme, logout
  const THEMES = ['auto', 'light', 'dark'];
  function setTheme(t) {
    if (t === 'auto') document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', t);
    $('#theme-toggle').title = 'Theme: ' + t + ' (click to change)';
    localStorage.setItem('bm-theme', t);
  }
  $('#theme-toggle').addEventListener('click', () => {
    const cur = localStorage.getItem('bm-theme') || 'auto';
    setTheme(THEMES[(THEMES.indexOf(cur) + 1) % THEMES.length]);
  });
  $('#logout').addEventListener('click', async () => {
    try { await api('POST', '/api/logout', {}); } catch (_) { /* go anyway */ }
    location.href = '/login';
  });
  let redirecting = false;
  BM.onUnauthorized = () => {
    if (redirecting) return;
    redirecting = true;
    // Signed out while following a deep link: the login replays it.
    if (lastDeepLink) { try { sessionStorage.setItem('bm-deferred-route', lastDeepLink); } catch (_) { /* storage off */ } }
    location.href = '/login';
  };

  // ---------------------------------------------------------------- wiring for detail.js
  BM.app = {
    openCompose, resendAsIs, selectId, openHeld, showDevice, showFilter,
    setView: v => setView(v),
    status: () => S.status,
    onDetailClosed() { list.render(); scrollEl.focus({ preventScroll: true }); },
    /** The detail changed a row's mark or comment: the list shows it at once. */
    annotated(id, marker, comment) {
      const r = S.ids.get(id);
      if (r) { r.marker = marker; r.comment = comment; list.refresh(true); }
    },
    relayout() { list.render(); },
  };

  // ---------------------------------------------------------------- start
  setTheme(localStorage.getItem('bm-theme') || 'auto');
  const h0 = readHash();
  S.filter = h0.filter;
  S.highlight = h0.highlight;
  filterEl.value = S.filter;
  hlEl.value = S.highlight;
  filterEl.classList.toggle('active', !!S.filter.trim());
  hlEl.classList.toggle('active', !!S.highlight.trim());
  $('#filter-clear').hidden = !S.filter;
  S.newestFirst = localStorage.getItem('bm-sort') !== 'oldest';
  sortBtn.textContent = S.newestFirst ? '↓ Newest first' : '↑ Oldest first';
  setView(h0.view, true);
  // A deep link opened before the login: the login page kept it (the gate opened, the route replays).
  let deferred = null;
  try { deferred = sessionStorage.getItem('bm-deferred-route'); sessionStorage.removeItem('bm-deferred-route'); } catch (_) { /* storage off */ }
  const link0 = deepLink(location.hash) || deepLink(deferred);
  if (link0) followDeepLink(link0);
  reload();                 // the first page: one request
  connect();
  api('GET', '/api/held').then(r => onHeld(r.held || [])).catch(() => {});
  updateStatusbar();
  scrollEl.focus({ preventScroll: true });
})();
