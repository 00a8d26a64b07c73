// Formatting and parsing helpers: times, sizes, URLs, DNS rows, filters, errors (no DOM).

// ------------------------------------------------------------------ formatting
const pad2 = n => (n < 10 ? '0' : '') + n;
const pad3 = n => (n < 10 ? '00' : n < 100 ? '0' : '') + n;

/** Local wall-clock HH:MM:SS.mmm of an RFC 3339 time. */
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds()) + '.' + pad3(d.getMilliseconds());
}

export function fmtDateTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmtTime(iso);
}

export function fmtAgo(iso) {
  const t = Date.parse(iso);
  if (isNaN(t)) return '';
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 60) return Math.floor(s) + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

export function fmtSize(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(n < 10240 ? 1 : 0) + ' KB';
  if (n < 1024 * 1024 * 1024) return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + ' MB';
  return (n / 1073741824).toFixed(1) + ' GB';
}

export function fmtDur(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  return Math.floor(ms / 60000) + 'm ' + Math.round((ms % 60000) / 1000) + 's';
}

export const fmtInt = n => (n === null || n === undefined) ? '—' : Number(n).toLocaleString('en-US');

export function fmtUptime(s) {
  if (s === null || s === undefined) return '';
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + 'd ' + h + 'h';
  if (h) return h + 'h ' + m + 'm';
  if (m) return m + 'm ' + (s % 60) + 's';
  return s + 's';
}

/** Short form of a content type for the list's Type column. */
export function shortType(ct) {
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
}

/** settings.json's error as the CLI gives it ("12:1: expected …") said with its line and column. */
export function settingsProblem(error) {
  const m = /^(\d+):(\d+): ([\s\S]*)$/.exec(String(error || ''));
  return m ? 'settings.json is invalid at line ' + m[1] + ', column ' + m[2] + ': ' + m[3] + ' (' + m[1] + ':' + m[2] + ').'
    : 'settings.json is invalid: ' + (error || 'unknown error') + '.';
}

/** A row's host as a person reads it: with its port unless that is the scheme's default (localhost:8443, not localhost). */
export function hostWithPort(url, host) {
  const auth = splitUrl(url)[0].replace(/^[^@]*@/, '');
  const scheme = String(url || '').split('://')[0].toLowerCase();
  const m = /^(.*?)(?::(\d+))?$/.exec(auth);
  let name = host || m[1];
  const port = m[2];
  if (!port || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443')) return name;
  if (name.includes(':') && !name.startsWith('[')) name = '[' + name + ']';
  return name + ':' + port;
}

/** A held message's countdown: "sent on in 42 s", or "waits until resolved" when it has no deadline (null). */
export function heldCountdown(expiresAt, now) {
  if (expiresAt === null || expiresAt === undefined || expiresAt === '') return 'waits until resolved';
  const at = Date.parse(expiresAt);
  if (Number.isNaN(at)) return '';
  const s = Math.ceil((at - (now === undefined ? Date.now() : now)) / 1000);
  if (s <= 0) return 'sent on now';
  return 'sent on in ' + (s < 60 ? s + ' s' : Math.floor(s / 60) + ' min ' + (s % 60) + ' s');
}

/** [host, path] of a URL without new URL() (cheap, and never throws). */
export function splitUrl(url) {
  url = String(url || '');
  const s = url.indexOf('://');
  if (s < 0) return ['', url];
  const rest = url.slice(s + 3);
  const p = rest.search(/[/?#]/);
  if (p < 0) return [rest, '/'];
  return [rest.slice(0, p), rest[p] === '/' ? rest.slice(p) : '/' + rest.slice(p)];
}

/** A same-origin path from the API (e.g. a body's download_url), or null: never a javascript: or foreign URL. */
export function safePath(u) {
  return typeof u === 'string' && u.startsWith('/') && !u.startsWith('//') && !u.startsWith('/\\') ? u : null;
}

export function statusClass(status) {
  if (status === null || status === undefined) return '';
  return 's' + Math.floor(status / 100);
}

// ------------------------------------------------------------------ DNS rows and devices
// A DNS query is stored as a row: method "DNS", url dns://NAME/TYPE, status the rcode.
const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED', 'YXDOMAIN', 'YXRRSET', 'NXRRSET', 'NOTAUTH', 'NOTZONE'];

/** {name, type, rcode, ok} for a DNS row, null for anything else. */
export function dnsInfo(r) {
  if (!r || (r.method !== 'DNS' && !String(r.url || '').startsWith('dns://'))) return null;
  const [host, path] = splitUrl(r.url);
  const name = r.host || host;
  const type = path.replace(/^\//, '') || '?';
  const code = r.status;
  const rcode = r.reason || (code === null || code === undefined ? '' : RCODES[code] || 'RCODE ' + code);
  return { name, type, rcode, ok: code === 0 || rcode === 'NOERROR' };
}

/** The filter for one device's exchanges: ~device NAME (a name from the network that is not a
 *  plain word is regex-escaped, then quoted with the parser's escapes). */
export function deviceFilter(name) {
  name = String(name);
  if (/^[A-Za-z0-9._:-]+$/.test(name)) return '~device ' + name;
  const re = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return '~device "' + re.replace(/[\\"]/g, '\\$&') + '"';
}

/** The onboarding page's address when its listener is bound (an unspecified host: this page's). */
export function onboardingURL(st) {
  const ob = st && st.web && st.web.onboarding;
  if (!ob || !ob.bound) return null;
  let host = String(ob.bound);
  const m = /^(0\.0\.0\.0|\[::\]|::):(\d+)$/.exec(host);
  if (m) host = (location.hostname.includes(':') ? '[' + location.hostname + ']' : location.hostname) + ':' + m[2];
  return 'http://' + host + '/';
}

// ------------------------------------------------------------------ misc
export function debounce(fn, ms) {
  let t = 0;
  const d = (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  d.cancel = () => clearTimeout(t);
  return d;
}

/** "line 3, column 7: msg" from a 422 body {error, line, column}. */
export function describeError(err) {
  const d = (err && err.data) || {};
  let where = '';
  if (d.line !== undefined && d.line !== null) where = 'line ' + d.line + (d.column !== undefined && d.column !== null ? ', column ' + d.column : '') + ': ';
  return where + ((d.error) || (err && err.message) || String(err));
}
