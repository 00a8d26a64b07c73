// A device's readiness steps (enrolled, admitted, PAC, mode, CA, traffic, online), as the Devices and Status views show them.

import { h } from './dom.js';
import { fmtDateTime } from './util.js';

/** A device's readiness steps (seed 004's paired / CA trusted / PAC / port, as Busymate has them). */
function deviceSteps(d) {
  const how = d.port ? 'port ' + d.port : d.named ? 'by address' : null;
  const until = d.admitted_until ? 'Admitted until ' + fmtDateTime(d.admitted_until) : null;
  return [
    { key: 'enrolled', label: 'enrolled', ok: !!d.enrolled_at,
      title: d.enrolled_at ? 'Opened its enrolment link ' + fmtDateTime(d.enrolled_at) + ' (' + d.enrolment + ')'
        : d.enrolment ? 'Enrolment: ' + d.enrolment : d.named ? 'No enrolment link: New link gives it one' : 'Not named' },
    { key: 'admitted', label: 'admitted', ok: !!d.admitted_until,
      title: until ? until + (d.enrolled_at ? ', renewed while it sends traffic' : '') : 'No grant admits it (access.allow may)' },
    { key: 'pac', label: 'PAC fetched', ok: d.pac_fetches > 0,
      title: d.pac_fetches > 0 ? 'Fetched its PAC ' + d.pac_fetches + '×' : 'Has not fetched a PAC from the onboarding listener' },
    { key: 'mode', label: 'mode', ok: !!(d.named || d.source),
      title: d.source ? 'Its traffic arrives by ' + d.source + (how ? ' (' + how + ')' : '')
        : how ? 'Named, ' + how + ': set its proxy ' + (d.port ? 'to this port' : 'or PAC') + ', or route it through this machine (transparent mode)'
          : 'Not named: busymate devices add NAME' },
    { key: 'ca', label: 'CA downloaded', ok: d.ca_downloads > 0,
      title: d.ca_downloads > 0 ? 'Fetched the CA from the onboarding page ' + d.ca_downloads + '×' : 'Has not fetched the CA from the onboarding page (needed for HTTPS interception)' },
    { key: 'trusted', label: 'CA trusted', ok: !!d.ca_trusted_at,
      title: d.ca_trusted_at ? 'Completed an intercepted TLS handshake ' + fmtDateTime(d.ca_trusted_at) + ': it trusts the CA'
        : 'No intercepted TLS handshake completed yet (since the tunnel started): install and trust the CA on the device' },
    { key: 'traffic', label: 'traffic seen', ok: !!d.last_seen,
      title: d.last_seen ? 'Last traffic ' + fmtDateTime(d.last_seen) + (d.source ? ' by ' + d.source : '') : 'No traffic yet' },
    { key: 'online', label: 'online', ok: !!d.online, title: d.online ? 'Traffic within the idle window' : 'No traffic within the idle window' },
  ];
}

export function steps(d) {
  return h('span', { class: 'steps' }, deviceSteps(d).map(x =>
    h('span', { class: 'step ' + (x.ok ? 'ok' : 'no'), 'data-step': x.key, 'data-ok': String(x.ok), title: x.title }, x.label)));
}
