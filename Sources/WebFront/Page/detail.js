// The detail pane: Request | Response | Timing | Connection | Breakpoints of one exchange.
// Captured data only ever reaches the DOM through textContent.
'use strict';

(function () {
  const { h, $, api, qs, clear } = BM;
  const pane = $('#detail');
  const splitter = $('#splitter');
  const TABS = [['request', 'Request'], ['response', 'Response'], ['messages', 'Messages'], ['timing', 'Timing'], ['connection', 'Connection'],
    ['breakpoints', 'Breakpoints']];
  let cur = null;            // the exchange shown (full JSON)
  let curId = null;
  let tab = localStorage.getItem('bm-tab') || 'response';
  let gen = 0;
  const bodyMode = {};       // side -> 'grpc' | 'tree' | 'text' | 'hex' | 'image' chosen by the user

  function show() {
    if (pane.hidden) {
      pane.hidden = false;
      splitter.hidden = false;
      BM.app.relayout();
    }
  }

  function close() {
    BM.messages.stop();
    gen++;
    cur = null;
    curId = null;
    pane.hidden = true;
    splitter.hidden = true;
    clear(pane);
    BM.app.onDetailClosed();
  }

  const isOpen = () => !pane.hidden;

  async function open(id) {
    show();
    if (curId === id && cur) return;
    const g = ++gen;
    curId = id;
    const row = BM.state.ids.get(id);
    renderLoading(id, row);
    let ex;
    try {
      ex = await api('GET', '/api/exchanges/' + id);
    } catch (e) {
      if (g !== gen) return;
      cur = null;
      clear(pane);
      pane.appendChild(head(id, row, null));
      pane.appendChild(h('div', { class: 'tab-body' }, h('div', { class: 'notice error' },
        e.status === 404 ? 'Exchange #' + id + ' is gone (the capture was cleared, or retention removed it).' : 'Could not load #' + id + ': ' + e.message)));
      return;
    }
    if (g !== gen) return;
    cur = ex;
    render();
  }

  function head(id, row, ex) {
    const r = ex || row || {};
    const dns = BM.dnsInfo(r.response && r.response.reason ? Object.assign({}, r, { reason: r.response.reason }) : r);
    const status = r.error ? h('span', { class: 'st err', title: r.error }, 'ERR')
      : dns ? h('span', { class: 'st ' + (dns.ok ? 'dns-ok' : 'dns-err') }, dns.rcode)
        : r.status ? h('span', { class: 'st ' + BM.statusClass(r.status) }, String(r.status)) : null;
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
    const g = gen;
    try {
      const saved = await api('PUT', '/api/exchanges/' + ex.id + '/annotation', change);
      BM.app.annotated(ex.id, saved.marker, saved.comment);
      if (g !== gen || cur !== ex) return;
      ex.marker = saved.marker;
      ex.comment = saved.comment;
      render();
    } catch (e) {
      BM.toast('Could not save: ' + e.message, true);
    }
  }

  function renderLoading(id, row) {
    clear(pane);
    pane.appendChild(head(id, row, null));
    pane.appendChild(h('div', { class: 'tab-body muted' }, 'Loading…'));
  }

  /** An in-flight (or held) entry: no stored exchange yet. */
  function showInflight(e) {
    show();
    gen++;
    cur = null;
    curId = null;
    clear(pane);
    pane.appendChild(head('…', e, null));
    const body = h('div', { class: 'tab-body' },
      h('div', { class: 'notice' }, e.held ? 'This request is held at a breakpoint. ' : 'This exchange is still in flight; its detail appears when it is stored.'),
      e.held ? h('p', null, h('button', { type: 'button', class: 'btn primary', onclick: () => BM.app.openHeld() }, 'Open the held panel')) : null,
      h('table', { class: 'kv plain' }, h('tbody', null,
        kv('Request ID', e.request_id), kv('Started', BM.fmtDateTime(e.started_at)), kv('Method', e.method), kv('URL', e.url))));
    pane.appendChild(body);
  }

  function kv(k, v) {
    return h('tr', null, h('td', null, k), h('td', null, v === null || v === undefined || v === '' ? '—' : v));
  }

  function render() {
    const ex = cur;
    BM.messages.stop();
    clear(pane);
    pane.appendChild(head(ex.id, null, ex));
    pane.appendChild(h('div', { class: 'd-actions' },
      h('button', { type: 'button', id: 'resend', 'data-test': 'resend', class: 'btn', title: 'Edit and resend', onclick: () => BM.app.openCompose(ex) }, '✎ Edit & resend…'),
      h('button', { type: 'button', id: 'resend-as-is', 'data-test': 'resend-as-is', class: 'btn', title: 'Send the same request again', onclick: () => BM.app.resendAsIs(ex.id) }, '↻ Resend'),
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
    if (tab === 'messages' && key !== 'messages') BM.messages.stop();
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
        if (ex.websocket) { BM.messages.render(body, ex); break; }
        renderMessage(body, ex, 'response');
        break;
      default: renderMessage(body, ex, 'response');
    }
  }

  async function copyCurl() {
    if (!cur || !cur.curl) return;
    BM.toast(await BM.copyText(cur.curl) ? 'cURL command copied' : 'Could not copy to the clipboard', false);
  }

  // ---------------------------------------------------------------- request / response
  function headersTable(headers) {
    const tb = h('tbody');
    for (const pair of headers || []) tb.appendChild(h('tr', null, h('td', null, String(pair[0])), h('td', null, String(pair[1]))));
    return h('table', { class: 'kv' }, tb);
  }

  function queryTable(url) {
    const q = String(url || '').split('#')[0].split('?').slice(1).join('?');
    if (!q) return null;
    const tb = h('tbody');
    for (const part of q.split('&')) {
      if (!part) continue;
      const eq = part.indexOf('=');
      const dec = s => { try { return decodeURIComponent(s.replace(/\+/g, ' ')); } catch (_) { return s; } };
      tb.appendChild(h('tr', null, h('td', null, dec(eq < 0 ? part : part.slice(0, eq))), h('td', null, eq < 0 ? '' : dec(part.slice(eq + 1)))));
    }
    return h('table', { class: 'kv' }, tb);
  }

  function renderMessage(box, ex, side) {
    const m = ex[side];
    if (side === 'response') {
      if (ex.error) box.appendChild(h('div', { class: 'notice error' }, 'Error: ' + ex.error));
      if (!m) {
        box.appendChild(h('div', { class: 'notice' }, ex.tls === 'passthrough'
          ? 'TLS passthrough: the connection was tunnelled without decryption, so there is no response to show.'
          : ex.error ? 'No response was received.' : 'No response.'));
        return;
      }
    }
    if (!m) { box.appendChild(h('div', { class: 'notice' }, 'No request recorded.')); return; }
    const version = (ex.request && ex.request.http_version) || 'HTTP/1.1';
    const dns = BM.dnsInfo(Object.assign({}, ex, { reason: ex.response && ex.response.reason }));
    const first = dns
      ? (side === 'request' ? 'DNS query ' + dns.name + ' ' + dns.type : 'DNS ' + (dns.rcode || '') + ' (rcode ' + m.status + ')' + (side === 'response' ? ' · answers below, one per line' : ''))
      : side === 'request'
        ? (m.method || '') + ' ' + (m.path || m.url || '') + ' ' + version
        : version + ' ' + m.status + (m.reason ? ' ' + m.reason : '');
    box.appendChild(h('div', { class: 'sec-title' }, side === 'request' ? 'Request line' : 'Status line',
      h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'btn small', 'data-test': 'raw-' + side, title: 'The message as HTTP/1.1 text', onclick: () => openRaw(ex.id, side) }, 'Raw message')));
    box.appendChild(h('div', { class: 'first-line' }, first));
    if (side === 'request' && m.url) {
      const qt = queryTable(m.url);
      if (qt) { box.appendChild(h('div', { class: 'sec-title' }, 'Query')); box.appendChild(qt); }
    }
    box.appendChild(h('div', { class: 'sec-title' }, 'Headers', h('span', { class: 'muted' }, String((m.headers || []).length))));
    box.appendChild(headersTable(m.headers));
    renderBody(box, ex.id, side, m.body, ex.grpc && ex.grpc[side] ? ex.grpc : null);
    // After the body, as on the wire (gRPC's grpc-status is one).
    if (m.trailers && m.trailers.length) {
      box.appendChild(h('div', { class: 'sec-title', 'data-test': 'trailers-' + side }, 'Trailers', h('span', { class: 'muted' }, String(m.trailers.length))));
      box.appendChild(headersTable(m.trailers));
    }
  }

  function renderBody(box, id, side, b, grpc) {
    const view = h('div', { id: 'body-view', 'data-test': 'body-view' });
    const tools = h('span', { class: 'body-tools' });
    box.appendChild(h('div', { class: 'sec-title' }, 'Body', h('span', { class: 'spacer' }), tools));
    if (!b || b.kind === 'empty' || (!b.size && !b.decoded_size)) {
      box.appendChild(view);
      view.appendChild(h('div', { class: 'body-empty' }, 'No body'));
      return;
    }
    const meta = h('div', { class: 'body-meta' });
    const metaItems = [];
    if (b.content_type) metaItems.push(h('span', { class: 'mono' }, b.content_type));
    metaItems.push(h('span', { title: 'bytes on the wire' }, BM.fmtSize(b.size) + ' on the wire'));
    if (b.decoded_size !== undefined && b.decoded_size !== b.size) metaItems.push(h('span', null, BM.fmtSize(b.decoded_size) + ' decoded'));
    if (b.content_encoding) metaItems.push(h('span', null, b.decoded ? 'decoded from ' + b.content_encoding : 'encoding ' + b.content_encoding + ' (not decoded)'));
    if (b.truncated) metaItems.push(h('span', { class: 'warn' }, '⚠ truncated: stored ' + BM.fmtSize(b.stored) + ' of ' + BM.fmtSize(b.size)));
    if (b.text_truncated) metaItems.push(h('span', { class: 'warn' }, '⚠ showing the first part only'));
    for (const it of metaItems) meta.appendChild(it);

    // View switch: gRPC/tree/text/hex/image as the kind allows.
    const hasText = typeof b.text === 'string';
    const modes = [];
    if (grpc) modes.push(['grpc', 'gRPC']);
    if (b.kind === 'json' && hasText) modes.push(['tree', 'Tree'], ['text', 'Text']);
    else if (b.kind === 'text' && hasText) modes.push(['text', 'Text']);
    else if (b.kind === 'image' && BM.safePath(b.preview_url)) modes.push(['image', 'Image']);
    modes.push(['hex', 'Hex']);
    const modeKey = side + ':' + (grpc ? 'grpc' : b.kind);
    let mode = bodyMode[modeKey];
    if (!modes.some(([k]) => k === mode)) mode = modes[0][0];
    if (modes.length > 1) {
      const sw = h('span', { class: 'view-switch' });
      for (const [k, label] of modes) {
        sw.appendChild(h('button', { type: 'button', class: k === mode ? 'on' : null, 'data-mode': k, onclick: () => {
          bodyMode[modeKey] = k;
          for (const x of sw.children) x.classList.toggle('on', x.dataset.mode === k);
          fillBody(view, id, side, b, k, grpc);
        } }, label));
      }
      tools.appendChild(sw);
    }
    if (BM.safePath(b.download_url)) tools.appendChild(h('a', { class: 'btn small', href: BM.safePath(b.download_url), download: '', title: 'Download the decoded body', 'data-test': 'download-body' }, '⤓ Download'));
    box.appendChild(meta);
    box.appendChild(view);
    fillBody(view, id, side, b, mode, grpc);
  }

  function fillBody(view, id, side, b, mode, grpc) {
    clear(view);
    if (mode === 'grpc') { BM.grpc.render(view, side, grpc); return; }
    if (mode === 'tree') {
      const tree = BM.json.renderJSONTree(b.text);
      if (tree) { view.appendChild(tree); return; }
      view.appendChild(h('div', { class: 'notice' }, 'Not valid JSON; shown as text.'));
      view.appendChild(h('pre', { class: 'body-text' }, b.text));
      return;
    }
    if (mode === 'text') { view.appendChild(h('pre', { class: 'body-text' }, b.text)); return; }
    if (mode === 'image') {
      const info = h('div', { class: 'muted small' });
      const img = h('img', { src: BM.safePath(b.preview_url), alt: side + ' image', decoding: 'async' });
      img.addEventListener('load', () => { info.textContent = img.naturalWidth + ' × ' + img.naturalHeight + ' px'; });
      img.addEventListener('error', () => { info.textContent = 'The image could not be decoded.'; });
      view.appendChild(h('div', { class: 'body-image' }, img));
      view.appendChild(h('div', { class: 'more-row' }, info));
      return;
    }
    hexView(view, id, side, b);
  }

  /**
   * Hex dump of the whole body in a scroller as tall as the dump: only the lines in view are drawn,
   * and their 64 KiB chunks are fetched from /hex as they come into view (a few kept), so the last
   * byte of a large body is a scroll away. Past what an element can be tall, the scroll position
   * maps onto the lines proportionally.
   */
  function hexView(view, id, side) {
    const LINE_H = 18, CHUNK = 64 << 10, PER_CHUNK = CHUNK / 16, KEEP = 24, MAX_H = 8e6;
    const pre = h('pre', { class: 'hex hex-window' });
    const spacer = h('div', { class: 'hex-spacer' }, pre);
    const scroller = h('div', { class: 'hex-scroll', tabindex: '0', 'data-test': 'hex-scroll', 'aria-label': side + ' body, hex' }, spacer);
    const info = h('div', { class: 'more-row' }, h('span', { class: 'muted' }, 'Loading…'));
    view.appendChild(scroller);
    view.appendChild(info);
    const myGen = gen;
    const chunks = new Map();   // chunk number -> lines, or 'loading'
    let total = 0, lines = 0, full = 0, height = 0, failed = null, frame = 0;

    const fetchChunk = async n => {
      chunks.set(n, 'loading');
      try {
        const res = await api('GET', '/api/exchanges/' + id + '/hex' + qs({ side, offset: n * CHUNK, length: CHUNK }));
        if (myGen !== gen) return null;
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
      if (myGen !== gen || !lines) return;
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
          'bytes ' + BM.fmtInt(first * 16) + '–' + BM.fmtInt(Math.min(total, last * 16)) + ' of ' + BM.fmtInt(total) + ' · scroll for more'));
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

  async function openRaw(id, side) {
    const dlg = $('#raw-dialog');
    $('#raw-title').textContent = 'Raw ' + side + ' of #' + id;
    const pre = $('#raw-text');
    pre.textContent = 'Loading…';
    dlg.showModal();
    try {
      pre.textContent = await BM.apiText('/api/exchanges/' + id + '/raw' + qs({ side }));
    } catch (e) {
      pre.textContent = 'Could not load the raw message: ' + e.message;
    }
  }
  $('#raw-copy').addEventListener('click', async () => {
    BM.toast(await BM.copyText($('#raw-text').textContent) ? 'Copied' : 'Could not copy');
  });

  // ---------------------------------------------------------------- timing
  function renderTiming(box, ex) {
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
    box.appendChild(h('div', { class: 'sec-title' }, 'Waterfall', h('span', { class: 'muted' }, 'total ' + BM.fmtDur(ex.duration_ms !== null && ex.duration_ms !== undefined ? ex.duration_ms : end - t0))));
    const wf = h('div', { class: 'wf' });
    for (const [cls, label, a, b] of phases) {
      const bar = h('div', { class: 'wf-bar ' + cls, title: label + ': ' + (b - a) + ' ms' });
      bar.style.left = ((a - t0) / span * 100) + '%';
      bar.style.width = Math.max(0.3, (b - a) / span * 100) + '%';
      wf.appendChild(h('div', { class: 'wf-label' }, label));
      wf.appendChild(h('div', { class: 'wf-track' }, bar));
      wf.appendChild(h('div', { class: 'wf-ms' }, BM.fmtDur(b - a)));
    }
    wf.appendChild(h('div', { class: 'wf-axis' }, h('span', null, '0'), h('span', null, BM.fmtDur(span / 2)), h('span', null, BM.fmtDur(span))));
    box.appendChild(wf);
    box.appendChild(h('div', { class: 'sec-title' }, 'Timestamps'));
    const rel = k => (isNaN(t(k)) ? '—' : BM.fmtDateTime(ex[k]) + '   (+' + (t(k) - t0) + ' ms)');
    box.appendChild(h('table', { class: 'kv plain' }, h('tbody', null,
      kv('Started', BM.fmtDateTime(ex.started_at)), kv('Connected', rel('connected_at')), kv('TLS done', rel('tls_done_at')),
      kv('First byte', rel('first_byte_at')), kv('Ended', rel('ended_at')))));
  }

  // ---------------------------------------------------------------- connection
  function renderConnection(box, ex) {
    const tlsText = { mitm: 'mitm — intercepted and decrypted', passthrough: 'passthrough — tunnelled, not decrypted', none: 'none — plain HTTP' };
    const th = ex.tls_handshake || {};
    const resent = ex.resent_from !== null && ex.resent_from !== undefined
      ? h('a', { href: '#', onclick: e => { e.preventDefault(); BM.app.selectId(ex.resent_from); } }, '#' + ex.resent_from) : null;
    box.appendChild(h('table', { class: 'kv plain' }, h('tbody', null,
      kv('Device', ex.device ? h('a', { href: '#', title: 'Show this device\'s traffic', onclick: e => { e.preventDefault(); BM.app.showDevice(ex.device); } }, ex.device) : null),
      kv('Front end', ex.front_end),
      kv('Client address', ex.client_address), kv('Server address', ex.server_address),
      kv('TLS', tlsText[ex.tls] || ex.tls), kv('SNI', th.sni), kv('TLS version', th.version), kv('Cipher', th.cipher),
      kv('Bytes up', ex.bytes_up !== undefined && ex.bytes_up !== null ? BM.fmtInt(ex.bytes_up) + ' B' : null),
      kv('Bytes down', ex.bytes_down !== undefined && ex.bytes_down !== null ? BM.fmtInt(ex.bytes_down) + ' B' : null),
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
    const same = [...BM.state.ids.values()].filter(r => r.connection_id === ex.connection_id && r.id !== ex.id).sort((a, b) => a.id - b.id);
    if (!same.length) return;
    box.appendChild(h('div', { class: 'sec-title' }, 'Same connection', h('span', { class: 'muted' }, String(same.length) + ' loaded')));
    const tb = h('tbody');
    for (const r of same.slice(0, 100)) {
      tb.appendChild(h('tr', null,
        h('td', null, h('a', { href: '#', onclick: e => { e.preventDefault(); BM.app.selectId(r.id); } }, '#' + r.id)),
        h('td', null, r.stream_id !== null && r.stream_id !== undefined ? 'stream ' + r.stream_id : ''),
        h('td', { title: r.url || '' }, (r.method || '') + ' ' + (BM.splitUrl(r.url)[1] || r.url || '')), h('td', null, r.status ? String(r.status) : '—')));
    }
    box.appendChild(h('table', { class: 'rules-table', 'data-test': 'same-connection' }, tb));
  }

  // ---------------------------------------------------------------- breakpoints
  function renderBreakpoints(box, ex) {
    const list = ex.breakpoints || [];
    if (!list.length) { box.appendChild(h('div', { class: 'notice' }, 'No breakpoint paused this exchange.')); return; }
    const tb = h('tbody');
    for (const b of list) {
      const held = b.paused_at && b.resumed_at ? BM.fmtDur(Date.parse(b.resumed_at) - Date.parse(b.paused_at)) : '—';
      tb.appendChild(h('tr', null, h('td', null, String(b.id)), h('td', null, b.kind), h('td', null, BM.fmtTime(b.paused_at)),
        h('td', null, b.resumed_at ? BM.fmtTime(b.resumed_at) : 'still held'), h('td', null, held), h('td', null, b.outcome || '—')));
    }
    box.appendChild(h('table', { class: 'rules-table' },
      h('thead', null, h('tr', null, ['#', 'Side', 'Paused', 'Resumed', 'Held for', 'Outcome'].map(x => h('th', null, x)))), tb));
  }

  BM.detail = { open, close, isOpen, showInflight, current: () => cur };
})();
