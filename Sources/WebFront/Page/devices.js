// The Devices view: every device, online or not, updated in place from the status feed; a click shows its traffic.

import { h, $, clear, append } from './dom.js';
import { fmtTime, fmtDateTime, fmtAgo, fmtInt, onboardingURL } from './util.js';
import { api } from './api.js';
import { S } from './store.js';
import { steps } from './devicesteps.js';
import { enrolCard, issueLink, showEnrolCard } from './enrol.js';
import { showDevice } from './views.js';

const droot = $('#view-devices');
const DV = { built: false, rows: new Map() };

function buildDevices() {
  clear(droot);
  DV.sub = h('span', { class: 'muted small', 'data-test': 'devices-sub' });
  DV.tbody = h('tbody');
  DV.table = h('section', { class: 'card', id: 'devices-card' },
    h('table', { class: 'devices-table', 'data-test': 'devices-table' },
      h('thead', null, h('tr', null, ['', 'Device', 'Identified by', 'Address', 'Last seen', 'Source', 'Today', 'Readiness', '', ''].map(x => h('th', null, x)))),
      DV.tbody),
    DV.foot = h('div', { class: 'card-foot muted small' }));
  DV.empty = h('div', { class: 'empty-card devices-empty', 'data-test': 'devices-empty' });
  DV.page = h('div', { class: 'page' },
    h('div', { class: 'page-title' }, 'Devices', DV.sub),
    enrolCard(), DV.table, DV.empty);
  droot.appendChild(DV.page);
  DV.rows = new Map();
  DV.built = true;
}

function addHelp(url) {
  return [
    h('p', null, 'Name a device so its traffic is labelled and its presence shows here live. Give it its own proxy port (from devices.port_pool):'),
    h('pre', { class: 'cmd' }, 'busymate devices add NAME'),
    h('p', null, 'or know it by its address:'),
    h('pre', { class: 'cmd' }, 'busymate devices add NAME --address 192.0.2.7'),
    url ? h('p', null, 'Or open the onboarding page on the device (the PAC file and the CA, no token): ',
      h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono', 'data-test': 'devices-onboarding-url' }, url))
      : h('p', { class: 'muted' }, 'Set onboarding.listen (e.g. "0.0.0.0:8080") to serve a setup page to devices: /proxy.pac, /ca.pem, /ca.der.'),
  ];
}

function fillDeviceRow(tr, d) {
  const c = tr._c;
  tr.dataset.online = String(!!d.online);
  tr.classList.toggle('offline', !d.online);
  c.dot.className = 'dot ' + (d.online ? 'green' : 'grey');
  c.dot.title = d.online ? 'online' : 'offline';
  c.state.textContent = d.online ? 'online' : 'offline';
  if (c.name.textContent !== d.name) c.name.textContent = d.name;
  c.named.hidden = !!d.named;
  const ident = d.port ? 'port ' + d.port : d.named ? 'by address' : 'not named';
  if (c.ident.textContent !== ident) c.ident.textContent = ident;
  c.ident.classList.toggle('muted', !d.named);
  c.addr.textContent = d.address || '—';
  c.last.textContent = d.last_seen ? fmtAgo(d.last_seen) : 'never';
  c.last.title = d.last_seen ? fmtDateTime(d.last_seen) : '';
  clear(c.source).appendChild(d.source ? h('span', { class: 'src-pill ' + d.source, 'data-test': 'device-source' }, d.source) : h('span', { class: 'muted' }, '—'));
  c.today.textContent = fmtInt(d.exchanges_today || 0);
  clear(c.steps).appendChild(steps(d));
  // Revoke only a link there is to revoke.
  if (c.revoke) c.revoke.hidden = !d.enrolment || d.enrolment === 'revoked';
}

function createDeviceRow(d) {
  const c = {};
  const tr = h('tr', { class: 'device-row', tabindex: '0', 'data-device': d.name, title: 'Show ' + d.name + '\'s traffic' },
    h('td', { class: 'dv-dot' }, c.dot = h('span', { class: 'dot' })),
    h('td', { class: 'dv-name' }, c.name = h('b', { 'data-test': 'device-name' }), ' ', c.named = h('span', { class: 'tag', title: 'Seen on the network, not named' }, 'seen'),
      h('div', { class: 'dv-state muted small' }, c.state = h('span', { 'data-test': 'device-state' }))),
    c.ident = h('td', { class: 'dv-ident' }),
    c.addr = h('td', { class: 'dv-addr mono' }),
    c.last = h('td', { class: 'dv-last' }),
    c.source = h('td', { class: 'dv-source' }),
    c.today = h('td', { class: 'dv-today num', 'data-test': 'device-today' }),
    c.steps = h('td', { class: 'dv-steps' }),
    c.actions = h('td', { class: 'dv-actions' }),
    h('td', { class: 'dv-go', 'aria-hidden': 'true' }, '›'));
  tr._c = c;
  if (d.named) {
    const act = (label, test, run) => {
      const b = h('button', { type: 'button', class: 'btn small', 'data-test': test }, label);
      b.addEventListener('click', ev => { ev.stopPropagation(); run(); });
      return b;
    };
    const path = '/api/devices/' + encodeURIComponent(d.name);
    append(c.actions, [
      c.newLink = act('New link', 'device-new-link', () => { issueLink('POST', path + '/link'); showEnrolCard(); }),
      c.revoke = act('Revoke', 'device-revoke', async () => {
        if (!confirm('Revoke ' + d.name + '\'s enrolment link? The admission it gave ends.')) return;
        try { await api('POST', path + '/revoke'); } catch (e) { alert((e.data && e.data.error) || String(e)); }
      }),
    ]);
  }
  const go = () => showDevice(tr.dataset.device);
  tr.addEventListener('click', go);
  tr.addEventListener('keydown', ev => { if (ev.key === 'Enter') { ev.preventDefault(); go(); } });
  return tr;
}

/** Updated in place on each status message (about once a second): rows keep their elements. */
export function renderDevices(st) {
  if (!DV.built) buildDevices();
  if (!st) { DV.sub.textContent = 'waiting for the status…'; DV.table.hidden = true; DV.empty.hidden = true; return; }
  const devs = st.devices || [];
  const online = devs.filter(d => d.online).length;
  DV.sub.textContent = devs.length
    ? online + ' online · ' + devs.length + ' device' + (devs.length === 1 ? '' : 's') + ' · updated ' + fmtTime(new Date().toISOString())
    : '';
  const url = onboardingURL(st);
  DV.table.hidden = !devs.length;
  DV.empty.hidden = !!devs.length;
  const helpKey = (devs.length ? 'n' : 'e') + (url || '');
  if (DV.helpKey !== helpKey) {
    DV.helpKey = helpKey;
    if (devs.length) {
      append(clear(DV.foot), ['Click a device to see its traffic (the filter ', h('code', null, '~device NAME'), ') · add one with ',
        h('code', null, 'busymate devices add NAME [--address IP]'),
        url ? [' · onboarding page ', h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono' }, url)] : null]);
    } else {
      append(clear(DV.empty), [h('div', { class: 'empty-title' }, 'No devices yet'), addHelp(url),
        h('p', { class: 'muted' }, 'A device is online while its traffic keeps arriving (devices.idle_seconds, 90 s by default); this view updates live.')]);
    }
  }
  const seen = new Set();
  let prev = null;
  for (const d of devs) {
    const key = d.name;
    if (seen.has(key)) continue;
    seen.add(key);
    let tr = DV.rows.get(key);
    if (!tr) { tr = createDeviceRow(d); DV.rows.set(key, tr); }
    fillDeviceRow(tr, d);
    const focused = DV.focus === key;
    tr.classList.toggle('focused', focused);
    if (focused && !DV.focusShown) { DV.focusShown = true; requestAnimationFrame(() => tr.scrollIntoView({ block: 'nearest' })); }
    const want = prev ? prev.nextSibling : DV.tbody.firstChild;
    if (want !== tr) DV.tbody.insertBefore(tr, want);
    prev = tr;
  }
  for (const [key, tr] of DV.rows) if (!seen.has(key)) { tr.remove(); DV.rows.delete(key); }
}

/** A deep link to a device: its row, marked, in the Devices view. */
export function focusDevice(name) {
  DV.focus = name;
  DV.focusShown = false;
  renderDevices(S.status);
}
