// The four views (Traffic, Devices, Settings, Status): switching between them, and the list shown for a device or a filter.

import { $$ } from './dom.js';
import { deviceFilter } from './util.js';
import { api } from './api.js';
import { S } from './store.js';
import { list, scrollEl } from './list.js';
import { filterEl, filterSoon, applyFilterInput } from './filter.js';
import { writeHash } from './router.js';
import { onStatus } from './statusfeed.js';
import { load as loadSettings } from './settings.js';
import { renderDevices } from './devices.js';
import { renderStatus } from './statusview.js';

export function setView(v, noHash) {
  if (!['traffic', 'devices', 'settings', 'status'].includes(v)) v = 'traffic';
  S.view = v;
  document.body.dataset.currentView = v;
  for (const b of $$('.view-tab')) b.classList.toggle('active', b.dataset.view === v);
  for (const p of $$('.view')) p.classList.toggle('active', p.dataset.viewPanel === v);
  if (v === 'settings') loadSettings();
  if (v === 'devices') renderDevices(S.status);
  if (v === 'status') {
    renderStatus(S.status, S.rps);
    api('GET', '/api/status').then(st => { if (!S.status) onStatus(st); else { S.status = st; renderStatus(S.status, S.rps); } }).catch(() => {});
  }
  if (v === 'traffic') list.render();
  if (!noHash) writeHash();
}
for (const b of $$('.view-tab')) b.addEventListener('click', () => setView(b.dataset.view));

/** From the Devices view: the list, filtered to one device. */
export function showDevice(name) {
  filterEl.value = deviceFilter(name);
  filterSoon.cancel();
  setView('traffic');
  applyFilterInput();
  scrollEl.focus({ preventScroll: true });
}

/** From the status view: the list with a filter (e.g. ~dns). */
export function showFilter(text) {
  filterEl.value = text;
  filterSoon.cancel();
  setView('traffic');
  applyFilterInput();
}
