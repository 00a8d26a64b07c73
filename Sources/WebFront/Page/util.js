// Busymate page: small helpers shared by the other scripts (loaded first).
// Everything captured from the wire is hostile: DOM is built with createElement and
// textContent only, never innerHTML.
'use strict';

const BM = window.BM = {};

/** h('div', {class: 'x', 'data-id': 3, title: 't', onclick: fn}, 'text', child, ...) */
BM.h = function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const k in attrs) {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked' || k === 'disabled' || k === 'selected') el[k] = !!v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  BM.append(el, children);
  return el;
};

BM.append = function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
};

BM.clear = function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
};

BM.$ = (sel, root) => (root || document).querySelector(sel);
BM.$$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

// ------------------------------------------------------------------ API
class ApiError extends Error {
  constructor(status, data, text) {
    super((data && data.error) || text || ('HTTP ' + status));
    this.status = status;
    this.data = data || {};
  }
}
BM.ApiError = ApiError;

/** fetch JSON; throws ApiError with .status and .data on a non-2xx answer. */
BM.api = async function api(method, path, body, opts) {
  const init = { method, headers: { 'Accept': 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
  if (opts && opts.signal) init.signal = opts.signal;
  if (body !== undefined) {
    if (opts && opts.raw) {
      init.body = body;
      init.headers['Content-Type'] = opts.contentType || 'application/octet-stream';
    } else {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    // Signed out (cookie expired or cleared): the login page gets a fresh token.
    BM.onUnauthorized && BM.onUnauthorized();
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!res.ok) throw new ApiError(res.status, data, text && !data ? text.slice(0, 300) : null);
  return data;
};

BM.apiText = async function apiText(path) {
  const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  if (!res.ok) {
    let data = null;
    try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
    throw new ApiError(res.status, data, text.slice(0, 300));
  }
  return text;
};

BM.qs = function qs(params) {
  const parts = [];
  for (const k in params) {
    const v = params[k];
    if (v === null || v === undefined || v === '') continue;
    parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
  }
  return parts.length ? '?' + parts.join('&') : '';
};

// ------------------------------------------------------------------ formatting
const pad2 = n => (n < 10 ? '0' : '') + n;
const pad3 = n => (n < 10 ? '00' : n < 100 ? '0' : '') + n;

/** Local wall-clock HH:MM:SS.mmm of an RFC 3339 time. */
BM.fmtTime = function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds()) + '.' + pad3(d.getMilliseconds());
};

BM.fmtDateTime = function fmtDateTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + BM.fmtTime(iso);
};

BM.fmtAgo = function fmtAgo(iso) {
  const t = Date.parse(iso);
  if (isNaN(t)) return '';
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 60) return Math.floor(s) + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
};

BM.fmtSize = function fmtSize(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(n < 10240 ? 1 : 0) + ' KB';
  if (n < 1024 * 1024 * 1024) return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + ' MB';
  return (n / 1073741824).toFixed(1) + ' GB';
};

BM.fmtDur = function fmtDur(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  return Math.floor(ms / 60000) + 'm ' + Math.round((ms % 60000) / 1000) + 's';
};

BM.fmtInt = n => (n === null || n === undefined) ? '—' : Number(n).toLocaleString('en-US');

BM.fmtUptime = function fmtUptime(s) {
  if (s === null || s === undefined) return '';
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + 'd ' + h + 'h';
  if (h) return h + 'h ' + m + 'm';
  if (m) return m + 'm ' + (s % 60) + 's';
  return s + 's';
};

/** Short form of a content type for the list's Type column. */
BM.shortType = function shortType(ct) {
  if (!ct) return '';
  const t = String(ct).split(';')[0].trim().toLowerCase();
  if (!t) return '';
  if (t.includes('json')) return 'json';
  if (t === 'text/html' || t.includes('xhtml')) return 'html';
  if (t.includes('javascript') || t.includes('ecmascript')) return 'js';
  if (t === 'text/css') return 'css';
  if (t.startsWith('image/')) return t.includes('svg') ? 'svg' : 'img';
  if (t.includes('xml')) return 'xml';
  if (t.startsWith('font/') || t.includes('font')) return 'font';
  if (t.startsWith('video/')) return 'video';
  if (t.startsWith('audio/')) return 'audio';
  if (t === 'application/x-www-form-urlencoded') return 'form';
  if (t.startsWith('multipart/')) return 'multi';
  if (t.includes('wasm')) return 'wasm';
  if (t.includes('protobuf') || t.includes('grpc')) return 'proto';
  if (t === 'text/event-stream') return 'sse';
  if (t.startsWith('text/')) return 'text';
  return 'bin';
};

/** [host, path] of a URL without new URL() (cheap, and never throws). */
/** settings.json's error as the CLI gives it ("12:1: expected …") said with its line and column. */
BM.settingsProblem = function settingsProblem(error) {
  const m = /^(\d+):(\d+): ([\s\S]*)$/.exec(String(error || ''));
  return m ? 'settings.json is invalid at line ' + m[1] + ', column ' + m[2] + ': ' + m[3] + ' (' + m[1] + ':' + m[2] + ').'
    : 'settings.json is invalid: ' + (error || 'unknown error') + '.';
};

/** A row's host as a person reads it: with its port unless that is the scheme's default (localhost:8443, not localhost). */
BM.hostWithPort = function hostWithPort(url, host) {
  const auth = BM.splitUrl(url)[0].replace(/^[^@]*@/, '');
  const scheme = String(url || '').split('://')[0].toLowerCase();
  const m = /^(.*?)(?::(\d+))?$/.exec(auth);
  let name = host || m[1];
  const port = m[2];
  if (!port || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443')) return name;
  if (name.includes(':') && !name.startsWith('[')) name = '[' + name + ']';
  return name + ':' + port;
};

/** A held message's countdown: "sent on in 42 s", or "waits until resolved" when it has no deadline (null). */
BM.heldCountdown = function heldCountdown(expiresAt, now) {
  if (expiresAt === null || expiresAt === undefined || expiresAt === '') return 'waits until resolved';
  const at = Date.parse(expiresAt);
  if (Number.isNaN(at)) return '';
  const s = Math.ceil((at - (now === undefined ? Date.now() : now)) / 1000);
  if (s <= 0) return 'sent on now';
  return 'sent on in ' + (s < 60 ? s + ' s' : Math.floor(s / 60) + ' min ' + (s % 60) + ' s');
};

BM.splitUrl = function splitUrl(url) {
  url = String(url || '');
  const s = url.indexOf('://');
  if (s < 0) return ['', url];
  const rest = url.slice(s + 3);
  const p = rest.search(/[/?#]/);
  if (p < 0) return [rest, '/'];
  return [rest.slice(0, p), rest[p] === '/' ? rest.slice(p) : '/' + rest.slice(p)];
};

/** A same-origin path from the API (e.g. a body's download_url), or null: never a javascript: or foreign URL. */
BM.safePath = function safePath(u) {
  return typeof u === 'string' && u.startsWith('/') && !u.startsWith('//') && !u.startsWith('/\\') ? u : null;
};

BM.statusClass = function statusClass(status) {
  if (status === null || status === undefined) return '';
  return 's' + Math.floor(status / 100);
};

// ------------------------------------------------------------------ DNS rows and devices
// A DNS query is stored as a row: method "DNS", url dns://NAME/TYPE, status the rcode.
const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED', 'YXDOMAIN', 'YXRRSET', 'NXRRSET', 'NOTAUTH', 'NOTZONE'];

/** {name, type, rcode, ok} for a DNS row, null for anything else. */
BM.dnsInfo = function dnsInfo(r) {
  if (!r || (r.method !== 'DNS' && !String(r.url || '').startsWith('dns://'))) return null;
  const [host, path] = BM.splitUrl(r.url);
  const name = r.host || host;
  const type = path.replace(/^\//, '') || '?';
  const code = r.status;
  const rcode = r.reason || (code === null || code === undefined ? '' : RCODES[code] || 'RCODE ' + code);
  return { name, type, rcode, ok: code === 0 || rcode === 'NOERROR' };
};

/** The filter for one device's exchanges: ~device NAME (a name from the network that is not a
 *  plain word is regex-escaped, then quoted with the parser's escapes). */
BM.deviceFilter = function deviceFilter(name) {
  name = String(name);
  if (/^[A-Za-z0-9._:-]+$/.test(name)) return '~device ' + name;
  const re = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return '~device "' + re.replace(/[\\"]/g, '\\$&') + '"';
};

// ------------------------------------------------------------------ misc UI
let toastTimer = 0;
BM.toast = function toast(msg, isError) {
  const t = document.getElementById('toast');
  t.textContent = msg;
  t.classList.toggle('error', !!isError);
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, isError ? 5000 : 2200);
};

/** Clipboard, with a fallback for plain-http pages on a LAN address (no secure context). */
BM.copyText = async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch (_) { /* fall back */ }
  const ta = BM.h('textarea', { class: 'offscreen' });
  ta.value = text;
  ta.style.position = 'fixed';
  ta.style.left = '-9999px';
  document.body.appendChild(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
  ta.remove();
  return ok;
};

BM.debounce = function debounce(fn, ms) {
  let t = 0;
  const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  d.cancel = () => clearTimeout(t);
  return d;
};

/** A promise-returning confirm() on the #confirm-dialog. */
BM.confirm = function confirm(title, text, okLabel) {
  const dlg = document.getElementById('confirm-dialog');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const ok = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  ok.textContent = okLabel || 'OK';
  return new Promise(resolve => {
    const done = v => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dlg.removeEventListener('close', onClose);
      if (dlg.open) dlg.close();
      resolve(v);
    };
    const onOk = () => done(true);
    const onCancel = () => done(false);
    const onClose = () => done(false);
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dlg.addEventListener('close', onClose);
    dlg.showModal();
    cancel.focus();
  });
};

/** "line 3, column 7: msg" from a 422 body {error, line, column}. */
BM.describeError = function describeError(err) {
  const d = (err && err.data) || {};
  let where = '';
  if (d.line !== undefined && d.line !== null) where = 'line ' + d.line + (d.column !== undefined && d.column !== null ? ', column ' + d.column : '') + ': ';
  return where + ((d.error) || (err && err.message) || String(err));
};
