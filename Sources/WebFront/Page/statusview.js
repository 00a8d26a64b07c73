// The Status view: the readiness and network cards, devices, traffic (a sparkline and the counters) and pinned hosts.

import { h, $, clear, link } from './dom.js';
import { fmtTime, fmtInt } from './util.js';
import { assess } from './readiness.js';
import { steps } from './devicesteps.js';
import { setView, showDevice } from './views.js';

const sroot = $('#view-status');
const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  return el;
}

function sparkline(values) {
  const n = 60;
  const vals = values.slice(-n);
  const max = Math.max(1, ...vals);
  const s = svg('svg', { class: 'spark', viewBox: '0 0 ' + (n - 1) + ' 100', preserveAspectRatio: 'none', role: 'img', 'aria-label': 'requests per second, last 60 s' });
  for (const y of [25, 50, 75]) s.appendChild(svg('line', { class: 'grid', x1: 0, x2: n - 1, y1: y, y2: y }));
  if (vals.length > 1) {
    const off = n - vals.length;
    const pts = vals.map((v, i) => (off + i) + ',' + (98 - (v / max) * 92).toFixed(2));
    s.appendChild(svg('path', { class: 'area', d: 'M' + off + ',100 L' + pts.join(' L') + ' L' + (n - 1) + ',100 Z' }));
    s.appendChild(svg('path', { class: 'line', d: 'M' + pts.join(' L') }));
  }
  return { el: s, max };
}

export function renderStatus(st, rps) {
  clear(sroot);
  const page = h('div', { class: 'page' });
  sroot.appendChild(page);
  page.appendChild(h('div', { class: 'page-title' }, 'Status', st ? h('span', { class: 'muted small' }, 'updated ' + fmtTime(new Date().toISOString())) : null));
  if (!st) { page.appendChild(h('div', { class: 'muted' }, 'Waiting for the status…')); return; }
  const { rows, network, overall, headline, tun, ls } = assess(st);
  const readiness = h('section', { class: 'card', id: 'readiness', 'data-test': 'readiness', 'data-state': overall },
    h('div', { class: 'ready-head' }, h('span', { class: 'dot big-dot ' + overall }),
      h('div', null, h('div', { class: 'rh-title' }, headline),
        h('div', { class: 'rh-sub' }, (st.mode || '') + (ls[0] ? ' · ' + (ls[0].bound || ls[0].address) : '') + ' · tunnel ' + (tun.state || '?') + (st.group ? ' · ' + st.group : '')))),
    ...rows);

  const counters = st.counters || {};
  const cgrid = h('div', { class: 'counters' });
  for (const k of Object.keys(counters)) {
    const v = counters[k];
    const txt = typeof v === 'number' ? (Number.isInteger(v) ? fmtInt(v) : v.toFixed(1)) : v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    cgrid.appendChild(h('div', { class: 'counter' }, h('div', { class: 'cv' }, txt), h('div', { class: 'cn' }, k.replace(/_/g, ' '))));
  }
  const sp = sparkline(rps || []);
  const traffic = h('section', { class: 'card', id: 'traffic-card' },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Traffic'), h('span', { class: 'muted small' }, 'requests per second, last 60 s')),
    h('div', { class: 'spark-wrap' }, sp.el, h('div', { class: 'spark-legend' }, h('span', null, '60 s ago'), h('span', null, 'peak ' + sp.max.toFixed(1) + ' req/s'), h('span', null, 'now'))),
    cgrid);
  const pins = st.pinned || [];
  const pinned = h('section', { class: 'card', id: 'status-pinned' },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Pinned hosts'), h('span', { class: 'muted small' }, String(pins.length))),
    h('div', { class: 'card-body' }, pins.length ? pins.map(p => h('div', { class: 'mono' }, typeof p === 'string' ? p : p.host)) : h('span', { class: 'muted' }, 'none')));
  const left = h('div', { class: 'card-column' }, readiness, network.el);
  const right = h('div', { class: 'card-column status-right' }, devicesCard(st), traffic, pinned);
  page.appendChild(h('div', { class: 'cards' }, left, right));
}

/** Seed 004's readiness per device, in the status view: its steps and presence. */
function devicesCard(st) {
  const devs = st.devices || [];
  const online = devs.filter(d => d.online).length;
  const body = devs.length
    ? devs.slice(0, 8).map(d => h('div', { class: 'ready-row dev-mini', 'data-device': d.name },
      h('span', { class: 'dot ' + (d.online ? 'green' : 'grey') }),
      h('span', { class: 'rr-name' }, link(d.name, () => showDevice(d.name))),
      h('div', { class: 'rr-val' }, steps(d))))
    : [h('div', { class: 'card-body muted' }, 'No devices yet: ', h('code', null, 'busymate devices add NAME'))];
  return h('section', { class: 'card', id: 'status-devices', 'data-test': 'status-devices' },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Devices'),
      h('span', { class: 'muted small' }, devs.length ? online + ' of ' + devs.length + ' online' : ''),
      h('span', { class: 'spacer' }), link(devs.length > 8 ? 'All ' + devs.length + ' →' : 'Open →', () => setView('devices'))),
    ...body);
}
