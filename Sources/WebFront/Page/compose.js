// The composer: a new request, an exchange edited and resent, or one filled from a pasted curl command.

import { h, $, $$, clear, toast } from './dom.js';
import { fmtSize, describeError } from './util.js';
import { api } from './api.js';

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
export function openCompose(ex) {
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
    note = 'The ' + (b.kind || 'binary') + ' body (' + fmtSize(b.decoded_size || b.size) + ') cannot be edited here; "Resend as is" sends it unchanged.';
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
    err.textContent = describeError(e);
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
    err.textContent = describeError(e);
    err.hidden = false;
    return;
  } finally { btn.disabled = false; }
  composeDlg.close();
  toast('Sent — the new exchange appears in the list');
});

export async function resendAsIs(id) {
  try {
    await api('POST', '/api/exchanges/' + id + '/resend', {});
    toast('Resent #' + id + ' — the new exchange appears in the list');
  } catch (e) { toast('Resend failed: ' + describeError(e), true); }
}

$('#compose').addEventListener('click', () => openCompose(null));
