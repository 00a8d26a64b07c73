// The page's entry point: imports every part, wires the page-wide bits, and starts it (first page, live feed, held list).
// index.html loads only this file (<script type="module">); the browser fetches the rest through the imports.
// Nothing is put on window: the modules share state through store.js.

import { $, $$ } from './dom.js';
import { S } from './store.js';
import { setTheme } from './theme.js';
import { readHash, deepLink, followDeepLink } from './router.js';
import { filterEl, hlEl } from './filter.js';
import { restoreSort } from './sort.js';
import { setView } from './views.js';
import { scrollEl } from './list.js';
import { reload } from './paging.js';
import { connect } from './live.js';
import { fetchHeld } from './held.js';
import { updateStatusbar } from './statusbar.js';
// Parts that only listen (their buttons, keys and the pointer): imported for their listeners.
import './filterhelp.js';
import './sessions.js';
import './compose.js';
import './keyboard.js';
import './splitter.js';
import './auth.js';

// Close buttons of every dialog.
for (const btn of $$('.dlg-close')) btn.addEventListener('click', () => btn.closest('dialog').close());

// ---------------------------------------------------------------- start
setTheme(localStorage.getItem('bm-theme') || 'auto');
const h0 = readHash();
S.filter = h0.filter;
S.highlight = h0.highlight;
filterEl.value = S.filter;
hlEl.value = S.highlight;
filterEl.classList.toggle('active', !!S.filter.trim());
hlEl.classList.toggle('active', !!S.highlight.trim());
$('#filter-clear').hidden = !S.filter;
restoreSort();
setView(h0.view, true);
// A deep link opened before the login: the login page kept it (the gate opened, the route replays).
let deferred = null;
try { deferred = sessionStorage.getItem('bm-deferred-route'); sessionStorage.removeItem('bm-deferred-route'); } catch (_) { /* storage off */ }
const link0 = deepLink(location.hash) || deepLink(deferred);
if (link0) followDeepLink(link0);
reload();                 // the first page: one request
connect();
fetchHeld();
updateStatusbar();
scrollEl.focus({ preventScroll: true });
