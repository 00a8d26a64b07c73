// The Session menu: export the (filtered) capture as HAR, import a HAR file, clear the capture.

import { $, toast, confirmDialog } from './dom.js';
import { fmtInt, describeError } from './util.js';
import { api, qs } from './api.js';
import { S, dropRows } from './store.js';
import { reload } from './paging.js';
import { close as closeDetail } from './detail.js';

const menu = $('#sessions-menu');
const menuBtn = $('#sessions-button');
export function toggleMenu(show) {
  show = show === undefined ? menu.hidden : show;
  menu.hidden = !show;
  menuBtn.setAttribute('aria-expanded', String(show));
  if (show) $('#export-har').href = '/api/har' + qs({ filter: S.filter.trim() });
}
menuBtn.addEventListener('click', ev => { ev.stopPropagation(); toggleMenu(); });
$('#export-har').addEventListener('click', () => {
  $('#export-har').href = '/api/har' + qs({ filter: S.filter.trim() });
  setTimeout(() => toggleMenu(false), 0);
});
$('#import-har').addEventListener('change', async ev => {
  const file = ev.target.files && ev.target.files[0];
  toggleMenu(false);
  if (!file) return;
  toast('Importing ' + file.name + '…');
  try {
    const res = await api('POST', '/api/har', file, { raw: true, contentType: 'application/json' });
    toast('Imported ' + fmtInt(res && res.imported) + ' exchanges from ' + file.name);
    reload();
  } catch (e) {
    toast('Import failed: ' + describeError(e), true);
  } finally { ev.target.value = ''; }
});
$('#clear-capture').addEventListener('click', async () => {
  toggleMenu(false);
  const n = S.status && S.status.store ? fmtInt(S.status.store.exchanges) + ' exchanges' : 'every exchange';
  if (!await confirmDialog('Clear the capture?', 'This deletes ' + n + ' and their bodies from the store. It cannot be undone.', 'Clear capture')) return;
  try {
    await api('DELETE', '/api/exchanges', { confirm: true });
    toast('Capture cleared');
    closeDetail();
    dropRows();
    reload();
  } catch (e) { toast('Clear failed: ' + describeError(e), true); }
});

/** Whether the menu is open (Escape closes it). */
export function menuOpen() { return !menu.hidden; }

document.addEventListener('click', ev => {
  if (!menu.hidden && !ev.target.closest('.menu-wrap')) toggleMenu(false);
});
