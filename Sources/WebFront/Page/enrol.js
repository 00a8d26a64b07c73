// The Devices view's enrolment card: add a device and show its link once, with its QR code (only a digest is kept).

import { h, clear, append } from './dom.js';
import { fmtDateTime } from './util.js';
import { api } from './api.js';

let nameInput = null;      // the device name box
let out = null;            // where the link (or the error) shows
let cardEl = null;

/** The card: a name box and Add; the link shows below it. */
export function enrolCard() {
  nameInput = h('input', { type: 'text', placeholder: 'device name, e.g. pixel-8', maxlength: '64', 'data-test': 'enrol-name', 'aria-label': 'Device name' });
  out = h('div', { class: 'enrol-out', 'data-test': 'enrol-out' });
  const form = h('form', { class: 'enrol-form', 'data-test': 'enrol-form' }, nameInput,
    h('button', { type: 'submit', class: 'btn primary', 'data-test': 'enrol-add' }, 'Add and get a link'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const name = nameInput.value.trim();
    if (name) issueLink('POST', '/api/devices', { name });
  });
  return cardEl = h('section', { class: 'card enrol-card', id: 'enrol-card', 'data-test': 'enrol-card' },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Enrol a device'),
      h('span', { class: 'muted small' }, 'one link per device: opened on it, it is admitted, named, and given its PAC and the CA')),
    h('div', { class: 'card-body' }, form, out));
}

export async function issueLink(method, path, body) {
  const box = clear(out);
  box.appendChild(h('span', { class: 'muted' }, 'issuing…'));
  try {
    const r = await api(method, path, body);
    append(clear(box), [
      h('img', { class: 'enrol-qr', src: 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(r.qr_svg || ''), alt: 'QR code of the enrolment link for ' + r.name, 'data-test': 'enrol-qr' }),
      h('div', null,
        h('div', null, h('b', null, r.name), r.port ? ' · port ' + r.port : '', ' · open on the device until ' + fmtDateTime(r.expires)),
        h('a', { href: r.link, class: 'mono', target: '_blank', rel: 'noopener', 'data-test': 'enrol-link' }, r.link),
        h('p', { class: 'muted small' }, 'Shown once: only a digest of it is kept. One device can open it; New link replaces it, Revoke withdraws it.'),
        r.loopback_only ? h('p', { class: 'warn small' }, 'The onboarding listener is on loopback: other machines cannot open this link.') : null),
    ]);
  } catch (e) {
    append(clear(box), [h('span', { class: 'error', 'data-test': 'enrol-error' }, (e.data && e.data.error) || e.message || String(e))]);
  }
}

/** Bring the card into view (New link shows its link there). */
export function showEnrolCard() {
  cardEl && cardEl.scrollIntoView({ block: 'nearest' });
}
