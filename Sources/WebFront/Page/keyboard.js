// Keyboard: / to filter, arrows, j/k, Page Up/Down, Home/End and Enter in the list, Escape to close what is open.

import { $$ } from './dom.js';
import { S, count, keyAt } from './store.js';
import { list, scrollEl } from './list.js';
import { filterEl } from './filter.js';
import { helpOpen, toggleHelp } from './filterhelp.js';
import { menuOpen, toggleMenu } from './sessions.js';
import { isOpen as detailIsOpen, close as closeDetail } from './detail.js';
import { select, openSelected, move } from './selection.js';
import { setView } from './views.js';

const anyDialogOpen = () => $$('dialog').some(d => d.open);
document.addEventListener('keydown', ev => {
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (anyDialogOpen()) return;   // <dialog> handles Esc itself
  const t = ev.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
  if (ev.key === 'Escape') {
    if (helpOpen()) { toggleHelp(false); return; }
    if (menuOpen()) { toggleMenu(false); return; }
    if (typing) { t.blur(); return; }
    if (S.view === 'traffic' && detailIsOpen()) { closeDetail(); scrollEl.focus(); }
    return;
  }
  if (typing) return;
  if (ev.key === '/') { ev.preventDefault(); if (S.view !== 'traffic') setView('traffic'); filterEl.focus(); filterEl.select(); return; }
  if (S.view !== 'traffic') return;
  if (t && t.closest && t.closest('#detail') && (ev.key === 'ArrowUp' || ev.key === 'ArrowDown')) return;  // let the pane scroll
  switch (ev.key) {
    case 'ArrowDown': case 'j': ev.preventDefault(); move(1); break;
    case 'ArrowUp': case 'k': ev.preventDefault(); move(-1); break;
    case 'PageDown': ev.preventDefault(); move(list.rowsPerPage()); break;
    case 'PageUp': ev.preventDefault(); move(-list.rowsPerPage()); break;
    case 'Home': ev.preventDefault(); if (count()) select(keyAt(0), { scroll: true }); break;
    case 'End': ev.preventDefault(); if (count()) select(keyAt(count() - 1), { scroll: true }); break;
    case 'Enter': if (S.sel) { ev.preventDefault(); openSelected(); } break;
    default: break;
  }
});
