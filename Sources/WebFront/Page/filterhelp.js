// The filter syntax popover: the operators, each inserted into the filter box on a click.

import { h, $ } from './dom.js';

const filterEl = $('#filter');

const HELP = [
  ['~d DOMAIN', 'domain (host) contains'], ['~u REGEX', 'URL'], ['~m METHOD', 'method, e.g. ~m POST'],
  ['~c CODE', 'status: 404, 4xx, 200-299'], ['~h TEXT', 'request or response header'], ['~hq TEXT', 'request header'],
  ['~hs TEXT', 'response header'], ['~b TEXT', 'request or response body'], ['~bq TEXT', 'request body'],
  ['~bs TEXT', 'response body'], ['~t TYPE', 'content type, e.g. ~t json'], ['~e', 'exchange ended with an error'],
  ['~src ADDR', 'client address'], ['~dst ADDR', 'server address'], ['~websocket', 'WebSocket upgrades'],
  ['~device NAME', 'from the device (its name, a regex)'], ['~dns', 'DNS queries (transparent mode)'],
  ['~tls MODE', 'mitm | passthrough | none'], ['~proto h2', 'HTTP version: h1 (1.0, 1.1) | h2'], ['~grpc', 'gRPC calls'],
  ['~rule NAME', 'a rule applied'], ['~marked', 'marked (★ in the detail)'], ['~marker TEXT', 'marked with this marker'],
  ['~comment TEXT', 'a comment contains'], ['~s', 'has a response'], ['~q', 'no response'], ['~a', 'asset: JS, CSS, image, font'],
  ['~http', 'HTTP exchanges'], ['~tcp', 'passed-through TCP tunnels'], ['~replay', 'sent again (resend)'],
  ['~since 10m', 'started since (10m, 2h, 1d, a time)'], ['!X', 'not'], ['X & Y', 'and (a space also means and)'], ['X | Y', 'or'],
  ['( … )', 'grouping'], ['word', 'a bare word matches the URL'],
];
const helpRows = $('#filter-help-rows');
for (const [op, desc] of HELP) {
  const tr = h('tr', null, h('td', { title: 'Insert' }, op), h('td', null, desc));
  tr.addEventListener('click', () => {
    const tok = op.split(' ')[0].replace('…', '');
    if (!tok.startsWith('~') && tok !== '!') return;
    const v = filterEl.value;
    filterEl.value = (v && !/\s$/.test(v) ? v + ' ' : v) + tok + (tok === '!' || op.split(' ').length === 1 ? '' : ' ');
    filterEl.focus();
    toggleHelp(false);
  });
  helpRows.appendChild(tr);
}
const helpBtn = $('#filter-help-button');
const helpPop = $('#filter-help');
export function toggleHelp(show) {
  show = show === undefined ? helpPop.hidden : show;
  helpPop.hidden = !show;
  helpBtn.setAttribute('aria-expanded', String(show));
  if (show) {
    const r = filterEl.getBoundingClientRect();
    helpPop.style.left = Math.max(8, Math.min(r.left, window.innerWidth - helpPop.offsetWidth - 8)) + 'px';
    helpPop.style.top = (r.bottom + 6) + 'px';
  }
}
helpBtn.addEventListener('click', ev => { ev.stopPropagation(); toggleHelp(); });

/** Whether the popover is open (Escape closes it first). */
export function helpOpen() { return !helpPop.hidden; }

document.addEventListener('click', ev => {
  if (!helpPop.hidden && !ev.target.closest('#filter-help') && ev.target !== helpBtn) toggleHelp(false);
});
