// The Request and Response tabs: the first line, query, headers, body (gRPC, JSON tree, text,
// image or hex, as the kind allows), trailers, and the raw message dialog.

import { h, $, clear, toast, copyText } from './dom.js';
import { fmtSize, safePath, dnsInfo } from './util.js';
import { apiText, qs } from './api.js';
import { renderJSONTree } from './jsonview.js';
import { renderGrpc } from './grpcview.js';
import { hexView } from './hexview.js';

const bodyMode = {};       // side -> 'grpc' | 'tree' | 'text' | 'hex' | 'image' chosen by the user

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

export function renderMessage(box, ex, side) {
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
  const dns = dnsInfo(Object.assign({}, ex, { reason: ex.response && ex.response.reason }));
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
  metaItems.push(h('span', { title: 'bytes on the wire' }, fmtSize(b.size) + ' on the wire'));
  if (b.decoded_size !== undefined && b.decoded_size !== b.size) metaItems.push(h('span', null, fmtSize(b.decoded_size) + ' decoded'));
  if (b.content_encoding) metaItems.push(h('span', null, b.decoded ? 'decoded from ' + b.content_encoding : 'encoding ' + b.content_encoding + ' (not decoded)'));
  if (b.truncated) metaItems.push(h('span', { class: 'warn' }, '⚠ truncated: stored ' + fmtSize(b.stored) + ' of ' + fmtSize(b.size)));
  if (b.text_truncated) metaItems.push(h('span', { class: 'warn' }, '⚠ showing the first part only'));
  for (const it of metaItems) meta.appendChild(it);

  // View switch: gRPC/tree/text/hex/image as the kind allows.
  const hasText = typeof b.text === 'string';
  const modes = [];
  if (grpc) modes.push(['grpc', 'gRPC']);
  if (b.kind === 'json' && hasText) modes.push(['tree', 'Tree'], ['text', 'Text']);
  else if (b.kind === 'text' && hasText) modes.push(['text', 'Text']);
  else if (b.kind === 'image' && safePath(b.preview_url)) modes.push(['image', 'Image']);
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
  if (safePath(b.download_url)) tools.appendChild(h('a', { class: 'btn small', href: safePath(b.download_url), download: '', title: 'Download the decoded body', 'data-test': 'download-body' }, '⤓ Download'));
  box.appendChild(meta);
  box.appendChild(view);
  fillBody(view, id, side, b, mode, grpc);
}

function fillBody(view, id, side, b, mode, grpc) {
  clear(view);
  if (mode === 'grpc') { renderGrpc(view, side, grpc); return; }
  if (mode === 'tree') {
    const tree = renderJSONTree(b.text);
    if (tree) { view.appendChild(tree); return; }
    view.appendChild(h('div', { class: 'notice' }, 'Not valid JSON; shown as text.'));
    view.appendChild(h('pre', { class: 'body-text' }, b.text));
    return;
  }
  if (mode === 'text') { view.appendChild(h('pre', { class: 'body-text' }, b.text)); return; }
  if (mode === 'image') {
    const info = h('div', { class: 'muted small' });
    const img = h('img', { src: safePath(b.preview_url), alt: side + ' image', decoding: 'async' });
    img.addEventListener('load', () => { info.textContent = img.naturalWidth + ' × ' + img.naturalHeight + ' px'; });
    img.addEventListener('error', () => { info.textContent = 'The image could not be decoded.'; });
    view.appendChild(h('div', { class: 'body-image' }, img));
    view.appendChild(h('div', { class: 'more-row' }, info));
    return;
  }
  hexView(view, id, side);
}

async function openRaw(id, side) {
  const dlg = $('#raw-dialog');
  $('#raw-title').textContent = 'Raw ' + side + ' of #' + id;
  const pre = $('#raw-text');
  pre.textContent = 'Loading…';
  dlg.showModal();
  try {
    pre.textContent = await apiText('/api/exchanges/' + id + '/raw' + qs({ side }));
  } catch (e) {
    pre.textContent = 'Could not load the raw message: ' + e.message;
  }
}
$('#raw-copy').addEventListener('click', async () => {
  toast(await copyText($('#raw-text').textContent) ? 'Copied' : 'Could not copy');
});
