// The address bar: #view=…&filter=…&highlight=… kept in step with the page, and the deep links #/exchange/ID and #/device/NAME.

import { S } from './store.js';
import { setView } from './views.js';
import { select } from './selection.js';
import { open as openDetail } from './detail.js';
import { focusDevice } from './devices.js';
import { filterEl, hlEl, applyFilterInput, applyHighlightInput } from './filter.js';

export function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { filter: p.get('filter') || '', highlight: p.get('highlight') || '', view: p.get('view') || 'traffic' };
}
export function writeHash() {
  const p = new URLSearchParams();
  if (S.view !== 'traffic') p.set('view', S.view);
  if (S.filter) p.set('filter', S.filter);
  if (S.highlight) p.set('highlight', S.highlight);
  const s = p.toString();
  history.replaceState(null, '', s ? '#' + s : location.pathname + location.search);
}
/** `#/exchange/ID` and `#/device/NAME` (busymate web url --exchange, list --json's links): they only navigate. */
export function deepLink(hash) {
  const m = /^#\/(exchange|device)\/([^?#]+)$/.exec(hash || '');
  if (!m) return null;
  let v;
  try { v = decodeURIComponent(m[2]); } catch (_) { return null; }
  if (m[1] === 'exchange') return /^[0-9]{1,15}$/.test(v) ? { exchange: Number(v) } : null;
  return /^[A-Za-z0-9._:-]{1,64}$/.test(v) ? { device: v } : null;
}
export function followDeepLink(link) {
  S.lastDeepLink = link.exchange ? '#/exchange/' + link.exchange : '#/device/' + encodeURIComponent(link.device);
  if (link.exchange) {
    setView('traffic', true);
    if (S.ids.has(link.exchange)) select('s' + link.exchange, { scroll: true, center: true, open: true });
    else openDetail(link.exchange);
  } else if (link.device) {
    setView('devices', true);
    focusDevice(link.device);
  }
  writeHash();
}
window.addEventListener('hashchange', () => {
  const link = deepLink(location.hash);
  if (link) { followDeepLink(link); return; }
  const st = readHash();
  if (st.view !== S.view) setView(st.view, true);
  if (st.filter !== S.filter) { filterEl.value = st.filter; applyFilterInput(); }
  if (st.highlight !== S.highlight) { hlEl.value = st.highlight; applyHighlightInput(); }
});
