// The appliance status from the feed, fanned out: status bar, settings banner, Devices badge, empty-list commands, open views.

import { $ } from './dom.js';
import { settingsProblem } from './util.js';
import { S } from './store.js';
import { showDeviceColumn } from './rows.js';
import { updateStatusbar } from './statusbar.js';
import { renderStatus } from './statusview.js';
import { renderDevices } from './devices.js';
import { setView } from './views.js';

export function onStatus(st) {
  if (!st) return;
  S.status = st;
  const rps = st.counters && typeof st.counters.requests_per_second === 'number' ? st.counters.requests_per_second : 0;
  S.rps.push(rps);
  if (S.rps.length > 60) S.rps.shift();
  updateStatusbar();
  updateSettingsBanner();
  if (S.view === 'status') renderStatus(S.status, S.rps);
  if (S.view === 'devices') renderDevices(S.status);
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

/** settings.json that does not parse: said on every view from the first status, not only on a save. */
function updateSettingsBanner() {
  const se = S.status && S.status.settings;
  const el = $('#settings-banner');
  const bad = !!se && se.valid === false;
  el.hidden = !bad;
  if (!bad) return;
  const text = settingsProblem(se.error) + ' The last good settings stay in force and proxying goes on with them; fix the file to apply a change.';
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
