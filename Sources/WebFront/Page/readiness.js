// The readiness verdict: the Status view's readiness and Network rows, and the one verdict the status bar shows too.

import { h, link } from './dom.js';
import { fmtTime, fmtInt, fmtUptime, settingsProblem, onboardingURL } from './util.js';

function row(color, name, ...val) {
  return h('div', { class: 'ready-row' }, h('span', { class: 'dot ' + color }), h('span', { class: 'rr-name' }, name), h('div', { class: 'rr-val' }, ...val));
}

const stateColor = s => (s === 'ready' ? 'green' : s === 'stopped' || s === 'failed' ? 'red' : s ? 'amber' : 'grey');

/**
 * The readiness card's rows and the one verdict both the Status view and the Traffic view's
 * status bar show: red anywhere is "Not ready"; amber with the tunnel ready is "Ready, with
 * warnings" (a broken settings.json is one: the last good settings stay in force and proxying
 * goes on); the tunnel not ready yet is "Not ready" too.
 */
export function assess(st) {
  const rows = [];
  const colors = [];
  const add = (c, ...rest) => { colors.push(c); rows.push(row(c, ...rest)); };
  const sup = st.supervisor || {};
  add(sup.running ? 'green' : 'red', 'Supervisor', sup.running ? 'running' : 'not running',
    sup.pid ? h('span', { class: 'muted' }, ' · pid ' + sup.pid) : null,
    sup.uptime_seconds !== undefined ? h('span', { class: 'muted' }, ' · up ' + fmtUptime(sup.uptime_seconds)) : null);
  const tun = st.tunnel || {};
  add(stateColor(tun.state), 'Tunnel', tun.state || 'unknown',
    tun.pid ? h('span', { class: 'muted' }, ' · pid ' + tun.pid) : null,
    h('span', { class: 'muted' }, ' · ' + (tun.restarts || 0) + ' restart' + (tun.restarts === 1 ? '' : 's')),
    tun.last_exit ? h('div', { class: 'rr-warn' }, 'last exit: ' + (typeof tun.last_exit === 'object' ? JSON.stringify(tun.last_exit) : tun.last_exit)) : null);
  const web = st.web || {};
  add(stateColor(web.state), 'Web', web.state || 'unknown', web.pid ? h('span', { class: 'muted' }, ' · pid ' + web.pid) : null,
    h('span', { class: 'muted' }, ' · ' + (web.restarts || 0) + ' restart' + (web.restarts === 1 ? '' : 's')));
  add(st.mode ? 'green' : 'grey', 'Mode', st.mode === 'transparent' ? 'transparent (VPN-style, nftables redirect)' : st.mode === 'proxy' ? 'proxy (explicit HTTP proxy, PAC)' : String(st.mode || 'unknown'));
  const ls = st.listeners || [];
  const lsBad = ls.some(l => l.error);
  const lsWarn = ls.some(l => l.warning);
  const lsAllBad = ls.length && ls.every(l => l.error);
  add(!ls.length ? 'amber' : lsAllBad ? 'red' : lsBad || lsWarn ? 'amber' : 'green', 'Listeners',
    ls.length ? ls.map(l => h('div', null, h('span', { class: 'mono' }, l.address),
      l.bound && l.bound !== l.address ? h('span', { class: 'muted mono' }, ' → ' + l.bound) : null,
      l.error ? h('span', { class: 'rr-err' }, ' ✗ ' + l.error) : l.bound ? h('span', { class: 'muted' }, ' ✓ listening') : null,
      l.warning ? h('span', { class: 'rr-warn' }, ' ⚠ ' + l.warning) : null)) : 'none configured');
  const ca = st.ca || {};
  add(ca.error || !ca.present ? 'red' : ca.trusted ? 'green' : 'amber', 'CA certificate',
    ca.error ? h('div', { class: 'rr-err' }, ca.error) : null,
    h('div', null, ca.present ? 'present' : 'missing', ' · ', ca.trusted ? 'trusted by this system' : h('span', { class: 'rr-warn' }, 'not trusted by this system'),
      ' · ', h('a', { href: '/ca.pem', download: '', 'data-test': 'download-ca' }, 'Download CA')),
    ca.subject ? h('div', { class: 'muted' }, ca.subject + (ca.not_after ? ' · valid until ' + String(ca.not_after).slice(0, 10) : '')) : null,
    ca.fingerprint_sha256 ? h('div', { class: 'mono muted', title: 'SHA-256 fingerprint' }, ca.fingerprint_sha256) : null);
  const se = st.settings || {};
  add(se.valid === false || (se.unknown_keys && se.unknown_keys.length) ? 'amber' : 'green', 'Settings',
    se.valid === false ? h('div', { class: 'rr-warn', 'data-test': 'settings-invalid' }, settingsProblem(se.error) + ' The last good settings stay in force.') : 'valid',
    se.path ? h('div', { class: 'mono muted' }, se.path) : null,
    se.unknown_keys && se.unknown_keys.length ? h('div', { class: 'rr-warn' }, 'unknown keys: ' + se.unknown_keys.join(', ')) : null);
  const cloud = st.cloud;
  if (cloud && (cloud.state !== 'not paired' || (cloud.sinks || []).length)) {
    // Seed 000's pairing: paired, re-pair soon, re-pair required; each sink's backlog and last push.
    const color = cloud.state === 're-pair required' ? 'red' : cloud.expiring_soon || (cloud.sinks || []).some(s => s.state === 'backing off' || s.state === 'refused') ? 'amber' : 'green';
    add(color, 'Cloud', h('span', { 'data-test': 'cloud-state' }, cloud.detail),
      cloud.name || cloud.api ? h('div', { class: 'muted' }, (cloud.name ? '"' + cloud.name + '"' : '') + (cloud.api ? ' on ' + cloud.api : '')) : null,
      ...(cloud.sinks || []).map(s => h('div', { class: 'muted', 'data-test': 'cloud-sink' },
        s.sink + ' → ' + (s.target || '?') + ': ' + s.state + ' · backlog ' + fmtInt(s.backlog || 0) + ' · ' + fmtInt(s.sent_rows || 0) + ' sent' +
        (s.last_push_at ? ' · last push ' + fmtTime(s.last_push_at) : '') +
        (s.dropped_unsent ? ' · ' + fmtInt(s.dropped_unsent) + ' dropped by retention unsent' : ''),
        s.last_error && s.state !== 'idle' && s.state !== 'sending' ? h('span', { class: 'rr-warn' }, ' · ' + s.last_error) : null)),
      ...(cloud.sinks || []).filter(s => s.realtime).map(s => h('div', { class: 'muted', 'data-test': 'cloud-realtime' }, 'Realtime: ' + s.realtime)));
  }
  const store = st.store || {};
  add('green', 'Store', fmtInt(store.exchanges) + ' exchanges', h('span', { class: 'muted' }, ' · last id ' + fmtInt(store.last_id)));
  const network = networkCard(st);
  colors.push(...network.colors);

  const overall = colors.includes('red') ? 'red' : colors.includes('amber') ? 'amber' : 'green';
  const headline = overall === 'red' || tun.state !== 'ready' ? 'Not ready' : overall === 'amber' ? 'Ready, with warnings' : 'Ready — capturing';
  return { rows, network, overall, headline, tun, ls };
}

/** The network: mode as configured and live, the nftables rules, what was refused, DNS, warnings, onboarding. */
function networkCard(st) {
  const n = st.network;
  const rows = [];
  const colors = [];
  const add = (c, ...rest) => { colors.push(c); rows.push(row(c, ...rest)); };
  if (n) {
    const live = n.live_mode || n.mode;
    add(live === n.mode ? 'green' : 'amber', 'Mode', h('b', null, n.mode || '?'), ' configured',
      h('span', { class: 'muted' }, ' · live '), h('b', { 'data-test': 'live-mode' }, live || '?'),
      n.both_seen ? h('span', { class: 'tag' }, 'proxy clients too') : null,
      h('div', { class: 'muted small' }, n.mode === 'transparent'
        ? 'nftables redirects TCP 80/443 and DNS to the tunnel; devices route through this machine.'
        : 'Clients set the proxy (or the PAC URL); nothing is redirected.'));
    const rules = String(n.rules || 'off');
    const rulesErr = rules.startsWith('error');
    add(rulesErr ? 'red' : rules === 'installed' ? 'green' : n.mode === 'transparent' ? 'amber' : 'grey', 'Rules',
      h('span', { class: rulesErr ? 'rr-err' : null, 'data-test': 'network-rules' }, rules),
      h('span', { class: 'muted' }, ' · nftables table inet ' + (n.table || 'busymate')));
    for (const w of n.warnings || []) add('amber', 'Warning', h('span', { class: 'rr-warn' }, w));
  } else {
    rows.push(row('grey', 'Network', h('span', { class: 'muted' }, 'not reported (the tunnel is not running)')));
  }
  const ob = st.web && st.web.onboarding;
  const url = onboardingURL(st);
  if (ob && ob.error) add('red', 'Onboarding', h('span', { class: 'rr-err' }, 'cannot listen on ' + ob.listen + ': ' + ob.error));
  else if (url) {
    add('green', 'Onboarding', h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono', 'data-test': 'onboarding-url' }, url),
      h('div', { class: 'muted small' }, 'Open it on a device: the PAC file (/proxy.pac) and the CA (/ca.pem, /ca.der), no token.'));
    // A PAC it would refuse: no proxy listener serves the devices it reaches.
    if (ob.warning) add('amber', 'Warning', h('span', { class: 'rr-warn', 'data-test': 'onboarding-warning' }, ob.warning));
  } else if (ob) add('amber', 'Onboarding', 'listening on ' + ob.listen + ' …');
  else rows.push(row('grey', 'Onboarding', h('span', { class: 'muted' }, 'off · set onboarding.listen to serve the setup page to devices')));
  if (n) {
    const counter = (v, name, title, extra, warn) => h('div', { class: 'counter' + (warn ? ' warn' : ''), title },
      h('div', { class: 'cv' }, fmtInt(v || 0), extra || null), h('div', { class: 'cn' }, name));
    rows.push(h('div', { class: 'counters net-counters' },
      counter(n.quic_rejected, 'QUIC rejected', 'UDP/443 refused (transparent mode), so clients fall back to TCP'),
      counter(n.refused, 'refused clients', 'Clients refused at accept: not on loopback and not in access.allow', null, n.refused > 0),
      counter(n.dns_queries, 'DNS queries', 'Answered by the forwarder (transparent mode)',
        n.dns_queries > 0 ? h('span', { class: 'cv-link' }, link('show', () => { location.hash = '#filter=' + encodeURIComponent('~dns'); }, 'show-dns')) : null)));
  }
  const el = h('section', { class: 'card', id: 'network-card', 'data-test': 'network-card' },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Network'), h('span', { class: 'muted small' }, 'mode, rules, devices arriving')),
    ...rows);
  return { el, colors };
}

/** The verdict alone, for the status bar: the Status view's, from the same function, so the two never disagree. */
export function readiness(st) {
  const a = assess(st);
  return { state: a.overall, headline: a.headline };
}
