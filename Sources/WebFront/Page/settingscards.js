// The Settings view's smaller cards: SSL proxying, upstream proxy, breakpoints, pinned hosts, and settings.json itself.

import { h, clear } from './dom.js';
import { fmtAgo } from './util.js';
import { api } from './api.js';
import { sectionError, card, listEditor, saveBar } from './settingsform.js';

export function sslSection(settings) {
  // settings.json's ssl_proxying: include, exclude, insecure_upstream, auto_pin (and keys this page does not edit, kept).
  const ssl = Object.assign({ include: [], exclude: [] }, settings.ssl_proxying || {});
  const work = { ...ssl, include: [...(ssl.include || [])], exclude: [...(ssl.exclude || [])], insecure_upstream: [...(ssl.insecure_upstream || [])] };
  if (!work.insecure_upstream.length && !ssl.insecure_upstream) delete work.insecure_upstream;
  const bar = saveBar(async () => {
    await api('PUT', '/api/settings/ssl-proxying', work);
    settings.ssl_proxying = { ...work };
  });
  const autoPin = h('input', { type: 'checkbox', checked: ssl.auto_pin !== false, 'data-test': 'ssl-auto-pin' });
  autoPin.addEventListener('change', () => { work.auto_pin = autoPin.checked; bar.markDirty(); });
  const pinLoopback = h('input', { type: 'checkbox', checked: ssl.pin_loopback === true, 'data-test': 'ssl-pin-loopback' });
  pinLoopback.addEventListener('change', () => { work.pin_loopback = pinLoopback.checked; bar.markDirty(); });
  const trust = h('input', { class: 'field', type: 'text', spellcheck: 'false', placeholder: '/etc/ssl/staging-ca.pem', value: ssl.upstream_trust || '',
    'data-test': 'ssl-upstream-trust', title: "An origin's own CA (PEM, absolute path on the appliance), trusted beside the system store" });
  trust.addEventListener('input', () => { const v = trust.value.trim(); if (v) work.upstream_trust = v; else delete work.upstream_trust; bar.markDirty(); });
  return card('ssl-proxying', 'SSL proxying', 'which hosts are decrypted (MITM); exclude wins',
    h('div', { class: 'card-body' },
      listEditor('Include', work.include, '*.example.com', v => { work.include = v; bar.markDirty(); }, 'ssl-include'),
      listEditor('Exclude', work.exclude, 'bank.example.com', v => { work.exclude = v; bar.markDirty(); }, 'ssl-exclude'),
      listEditor('Upstream certificate not verified', work.insecure_upstream || [], 'self-signed.internal',
        v => { work.insecure_upstream = v; bar.markDirty(); }, 'ssl-insecure'),
      h('label', { class: 'check' }, autoPin, 'Pass a host through when its client refuses our certificate (auto-pin)'),
      h('label', { class: 'check' }, pinLoopback, 'Let clients on this machine (127.0.0.1) pin too (off: a local curl without the CA never pins)'),
      h('label', { class: 'stack' }, h('span', null, 'Upstream CA (trusted beside the system store)'), trust)),
    bar.err, bar.foot);
}

export function breakpointsSection(settings) {
  // settings.json's {"request": [...], "response": [...], "timeout_seconds": N}: every array-valued
  // key is shown as a list, other keys are kept (the API refuses a key breakpoints do not have).
  const bp = settings.breakpoints && typeof settings.breakpoints === 'object' ? { ...settings.breakpoints } : {};
  for (const k of ['request', 'response']) if (!Array.isArray(bp[k])) bp[k] = [];
  const keys = Object.keys(bp).filter(k => Array.isArray(bp[k]));
  const bar = saveBar(async () => {
    await api('PUT', '/api/settings/breakpoints', bp);
    settings.breakpoints = { ...bp };
  });
  const body = h('div', { class: 'card-body' },
    h('div', { class: 'muted small' }, 'Exchanges that a URL pattern or a filter (~m POST & ~d api) matches pause here; continue, edit or abort them from the Held panel.'));
  for (const k of keys) {
    const title = k === 'patterns' ? 'URL patterns' : k === 'request' ? 'Pause requests matching' : k === 'response' ? 'Pause responses matching' : k;
    body.appendChild(listEditor(title, bp[k].map(String), 'https://api.example.com/v1/*', v => { bp[k] = v; bar.markDirty(); }, 'bp-' + k));
  }
  for (const k of Object.keys(bp).filter(x => !Array.isArray(bp[x]))) {
    body.appendChild(h('div', { class: 'muted small' }, k + ': ' + JSON.stringify(bp[k])));
  }
  return card('breakpoints-settings', 'Breakpoints', null, body, bar.err, bar.foot);
}

export function pinnedSection(settings) {
  const errEl = h('div', { class: 'section-error', hidden: true });
  const box = h('div');
  const draw = () => {
    clear(box);
    const pins = settings.pinned || [];
    if (!pins.length) { box.appendChild(h('div', { class: 'card-body muted' }, 'No pinned hosts. A host is pinned (passed through without MITM) when its TLS handshake fails because the client pins its certificate.')); return; }
    const tb = h('tbody');
    for (const p of pins) {
      const host = typeof p === 'string' ? p : p.host;
      tb.appendChild(h('tr', { 'data-host': host },
        h('td', { class: 'mono' }, host),
        h('td', { class: 'muted' }, (p && p.reason) || ''),
        h('td', { class: 'muted', title: (p && p.pinned_at) || '' }, p && p.pinned_at ? fmtAgo(p.pinned_at) : ''),
        h('td', { class: 'act' }, h('button', { type: 'button', class: 'btn small', 'data-test': 'unpin', onclick: async () => {
          try {
            await api('DELETE', '/api/pinned/' + encodeURIComponent(host));
            settings.pinned = (settings.pinned || []).filter(x => (typeof x === 'string' ? x : x.host) !== host);
            sectionError(errEl, null);
            draw();
          } catch (e) { sectionError(errEl, e); }
        } }, 'Unpin'))));
    }
    box.appendChild(h('table', { class: 'rules-table' }, h('thead', null, h('tr', null, h('th', null, 'Host'), h('th', null, 'Reason'), h('th', null, 'Pinned'), h('th', null, ''))), tb));
  };
  draw();
  return card('pinned', 'Pinned hosts', 'passed through without MITM', errEl, box);
}

export function upstreamSection(settings) {
  // settings.json's upstream_proxy: {host, port, username, password, bypass}, or null to dial directly.
  const v = settings.upstream_proxy && typeof settings.upstream_proxy === 'object' ? settings.upstream_proxy : null;
  const field = (name, type, placeholder, value) => h('input', { class: 'field', type, name, spellcheck: 'false', placeholder,
    value: value === undefined || value === null ? '' : String(value), 'data-test': 'upstream-' + name, autocomplete: 'off' });
  const host = field('host', 'text', 'proxy.example.com (empty: connect directly)', v && v.host);
  const port = field('port', 'number', '3128', v && v.port);
  const user = field('username', 'text', 'optional', v && v.username);
  const pass = field('password', 'password', v && v.password ? '(unchanged)' : 'optional', '');
  const bypass = field('bypass', 'text', '*.internal, localhost', v && Array.isArray(v.bypass) ? v.bypass.join(', ') : '');
  const bar = saveBar(async () => {
    let val = null;
    if (host.value.trim()) {
      // Keys this form does not know are kept.
      val = Object.assign({}, v || {}, { host: host.value.trim(), port: Number(port.value) });
      if (user.value.trim()) val.username = user.value.trim(); else delete val.username;
      if (pass.value) val.password = pass.value; else if (!val.username) delete val.password;
      const list = bypass.value.split(',').map(x => x.trim()).filter(Boolean);
      if (list.length) val.bypass = list; else delete val.bypass;
    }
    await api('PUT', '/api/settings/upstream-proxy', val);
    settings.upstream_proxy = val;
  });
  for (const el of [host, port, user, pass, bypass]) {
    el.addEventListener('input', bar.markDirty);
    el.addEventListener('keydown', e => { if (e.key === 'Enter') bar.btn.click(); });
  }
  const row = (label, el) => h('label', { class: 'form-row' }, h('span', { class: 'muted' }, label), el);
  return card('upstream', 'Upstream proxy', 'every upstream dial goes through it, but for the bypass hosts',
    h('div', { class: 'card-body upstream-form' }, row('Host', host), row('Port', port), row('User', user), row('Password', pass), row('Bypass', bypass)),
    bar.err, bar.foot);
}

export function rawSection(settings) {
  const pre = h('pre', { class: 'raw-settings' }, settings.text || '');
  const c = card('settings-raw', 'settings.json', 'read-only; hot-reloaded on every save',
    h('details', null, h('summary', { class: 'card-body' }, 'Show the file'), pre));
  c.classList.add('span2');
  return c;
}
