// The gRPC view of a body: the call (service, method, status), then each length-prefixed
// message's protobuf fields as `busymate show` prints them: by name when a descriptor set
// in settings (grpc.descriptor_sets) describes the method, else without a schema. The
// server decodes (GRPCExchange); each field's `display` is its line, so 64-bit values stay
// exact. Captured data only ever reaches the DOM through textContent.

import { h } from './dom.js';
import { fmtSize } from './util.js';

/** A gRPC body: the call, then each message's protobuf fields, decoded without a schema as `busymate show` prints them. */
export function renderGrpc(view, side, g) {
  const s = g[side];
  const call = [g.service && ('service ' + g.service), g.method && ('method ' + g.method)].filter(Boolean).join(' · ');
  const status = g.status === null || g.status === undefined ? (g.response ? 'no grpc-status in the response' : null)
    : 'status ' + g.status + ' ' + g.status_name + (g.message ? ': ' + g.message : '') + ' (from the ' + g.status_from + ')';
  view.appendChild(h('div', { class: 'body-meta', 'data-test': 'grpc-call' },
    h('span', { class: 'mono' }, call || 'gRPC'), status ? h('span', { class: g.status ? 'warn' : null }, status) : null,
    s.encoding ? h('span', null, 'grpc-encoding ' + s.encoding) : null,
    s.message_type ? h('span', { class: 'mono', 'data-test': 'grpc-type' }, s.message_type) : null));
  // Why fields are shown by number although descriptor sets are named.
  for (const text of g.schema_notes || []) view.appendChild(h('div', { class: 'notice', 'data-test': 'grpc-schema-note' }, text));
  const messages = s.messages || [];
  if (!messages.length) view.appendChild(h('div', { class: 'body-empty' }, 'No messages'));
  for (const m of messages) {
    const head = side + ' message ' + m.index + (m.compressed ? ' · compressed' : '') + ' · ' + fmtSize(m.size)
      + (m.compressed && m.decoded_size !== null ? ', ' + fmtSize(m.decoded_size) + ' decompressed' : '');
    view.appendChild(h('div', { class: 'sec-title grpc-head' }, head));
    const lines = [];
    if (m.problem) lines.push('(' + m.problem + ')');
    if (m.fields) {
      if (!m.fields.length) lines.push('{}  # empty message');
      pbLines(m.fields, '', lines);
    } else {
      if (m.error && m.error !== m.problem) lines.push('(' + m.error + ')');
      if (m.hex) lines.push('!bytes ' + m.hex);
    }
    view.appendChild(h('pre', { class: 'body-text grpc-message', 'data-test': 'grpc-message' }, lines.join('\n')));
  }
  if (s.omitted) view.appendChild(h('div', { class: 'muted small' }, s.omitted + ' more messages not shown'));
  if (s.problem) view.appendChild(h('div', { class: 'notice' }, s.problem));
  if (s.body_truncated) view.appendChild(h('div', { class: 'warn' }, 'The body was stored cut short: later messages are missing.'));
}

/** `name (1)` for a field the schema names, else its number. */
function label(f) { return f.name ? f.name + ' (' + f.number + ')' : String(f.number); }

/** A note after a value, in its comment when it has one (as `show` writes it). */
function noted(shown, note) { return note ? shown + (shown.indexOf('  # ') >= 0 ? ', ' : '  # ') + note : shown; }

function pbLines(fields, indent, out) {
  for (const f of fields) {
    if (f.type === 'message') {
      out.push(indent + label(f) + ':' + noted('', f.note));
      pbLines(f.fields || [], indent + '  ', out);
    } else if (f.type === 'map') {
      out.push(indent + label(f) + ':');
      for (const e of f.entries || []) {
        if (e.value.type === 'message') {
          out.push(indent + '  ' + e.key.display + ':');
          pbLines(e.value.fields || [], indent + '    ', out);
        } else {
          out.push(indent + '  ' + e.key.display + ': ' + noted(e.value.display, e.value.note));
        }
      }
    } else {
      out.push(indent + label(f) + ': ' + noted(f.display, f.note));
    }
  }
}
