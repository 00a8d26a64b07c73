// The page's HTTP API client: JSON fetches with the session cookie, errors as ApiError, query strings.
// (No CSRF token: the server checks Sec-Fetch-Site/Origin on every state-changing request.)

export class ApiError extends Error {
  constructor(status, data, text) {
    super((data && data.error) || text || ('HTTP ' + status));
    this.status = status;
    this.data = data || {};
  }
}

let unauthorized = null;
/** What a 401 does (auth.js: back to the login page). */
export function onUnauthorized(fn) { unauthorized = fn; }

/** fetch JSON; throws ApiError with .status and .data on a non-2xx answer. */
export async function api(method, path, body, opts) {
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
    unauthorized && unauthorized();
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!res.ok) throw new ApiError(res.status, data, text && !data ? text.slice(0, 300) : null);
  return data;
}

export async function apiText(path) {
  const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  if (!res.ok) {
    let data = null;
    try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
    throw new ApiError(res.status, data, text.slice(0, 300));
  }
  return text;
}

export function qs(params) {
  const parts = [];
  for (const k in params) {
    const v = params[k];
    if (v === null || v === undefined || v === '') continue;
    parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
  }
  return parts.length ? '?' + parts.join('&') : '';
}
