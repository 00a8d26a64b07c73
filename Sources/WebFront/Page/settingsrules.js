// The Rules card: the ordered rules (enable, move, edit, delete), the add/edit form, and testing a URL against them.

import { h, clear, toast, confirmDialog } from './dom.js';
import { describeError } from './util.js';
import { api } from './api.js';
import { sectionError, card, headerEditor } from './settingsform.js';

// The action-specific keys the rule form knows (settings.json's rule format).
const ACTION_KEYS = {
  block: ['status'], drop: [], map_local: ['file', 'directory'], map_remote: ['to'],
  host_override: ['address'], headers: ['request', 'response'],
};
const ALL_ACTION_KEYS = ['status', 'file', 'directory', 'to', 'address', 'request', 'response'];

function actionSummary(r) {
  switch (r.action) {
    case 'block': return 'answer ' + (r.status || 403);
    case 'drop': return 'close the connection';
    case 'map_local': return r.file ? 'serve ' + r.file : r.directory ? 'serve from ' + r.directory : '';
    case 'map_remote': return '→ ' + (r.to || '');
    case 'host_override': return 'dial ' + (r.address || '');
    case 'headers': {
      const parts = [];
      for (const side of ['request', 'response']) {
        const e = r[side];
        if (!e || typeof e !== 'object') continue;
        const n = (e.remove || []).length + Object.keys(e.set || {}).length + Object.keys(e.add || {}).length;
        parts.push(side + ': ' + n + ' edit' + (n === 1 ? '' : 's'));
      }
      return parts.join(', ');
    }
    default: {
      const extra = Object.keys(r).filter(k => !['name', 'enabled', 'match', 'action'].includes(k));
      return extra.map(k => k + '=' + JSON.stringify(r[k])).join(' ');
    }
  }
}

export function rulesSection(settings) {
  let rules = (settings.rules || []).map(r => ({ ...r }));
  let editing = -1;
  const errEl = h('div', { class: 'section-error', hidden: true });
  const tableBox = h('div');
  // PUT the whole ordered list; on a 422 the list stays as saved and the error shows
  // next to the section (or in the form, for an add/edit).
  const save = async (next, errTarget) => {
    try {
      await api('PUT', '/api/settings/rules', next);
      rules = next;
      settings.rules = next.map(r => ({ ...r }));
      sectionError(errEl, null);
      return true;
    } catch (e) {
      sectionError(errTarget || errEl, e);
      return false;
    } finally { drawTable(); }
  };

  function drawTable() {
    clear(tableBox);
    if (!rules.length) {
      tableBox.appendChild(h('div', { class: 'card-body muted' }, 'No rules. Rules block, map or rewrite requests whose URL matches a pattern, or that a filter (~m POST & ~d api) matches; the first enabled match of each kind applies.'));
      return;
    }
    const tb = h('tbody');
    rules.forEach((r, i) => {
      const enabled = h('input', { type: 'checkbox', checked: r.enabled !== false, title: 'Enabled', 'data-test': 'rule-enabled' });
      enabled.addEventListener('change', () => {
        const next = rules.map((x, k) => (k === i ? { ...x, enabled: enabled.checked } : x));
        save(next);
      });
      const move = d => {
        const next = rules.slice();
        const [x] = next.splice(i, 1);
        next.splice(i + d, 0, x);
        save(next);
      };
      tb.appendChild(h('tr', { class: r.enabled === false ? 'disabled' : null, 'data-rule': r.name },
        h('td', null, enabled),
        h('td', null, h('b', null, String(r.name || ''))),
        h('td', { class: 'mono' }, String(r.match || '')),
        h('td', null, h('span', { class: 'action-chip ' + r.action }, String(r.action || '?')), ' ', h('span', { class: 'muted mono' }, actionSummary(r))),
        h('td', { class: 'act' },
          h('button', { type: 'button', class: 'icon-btn', title: 'Move up', 'aria-label': 'Move up', disabled: i === 0, 'data-test': 'rule-up', onclick: () => move(-1) }, '↑'),
          h('button', { type: 'button', class: 'icon-btn', title: 'Move down', 'aria-label': 'Move down', disabled: i === rules.length - 1, 'data-test': 'rule-down', onclick: () => move(1) }, '↓'),
          h('button', { type: 'button', class: 'icon-btn', title: 'Edit', 'aria-label': 'Edit', 'data-test': 'rule-edit', onclick: () => editRule(i) }, '✎'),
          h('button', { type: 'button', class: 'icon-btn del', title: 'Delete', 'aria-label': 'Delete', 'data-test': 'rule-delete', onclick: async () => {
            if (await confirmDialog('Delete rule "' + r.name + '"?', 'The rule is removed from settings.json.', 'Delete')) save(rules.filter((_, k) => k !== i));
          } }, '×'))));
    });
    tableBox.appendChild(h('table', { class: 'rules-table' },
      h('thead', null, h('tr', null, h('th', { title: 'Enabled' }, 'On'), h('th', null, 'Name'), h('th', null, 'Match'), h('th', null, 'Action'), h('th', null, ''))), tb));
  }

  // Add / edit form: fields are named like the rule keys.
  const f = {
    name: h('input', { class: 'field', name: 'name', type: 'text', spellcheck: 'false', placeholder: 'block-ads' }),
    match: h('input', { class: 'field', name: 'match', type: 'text', spellcheck: 'false', placeholder: 'https://ads.example.com/*' }),
    action: h('select', { class: 'field', name: 'action' }, Object.keys(ACTION_KEYS).map(a => h('option', { value: a }, a))),
    enabled: h('input', { type: 'checkbox', name: 'enabled', checked: true }),
    status: h('input', { class: 'field', name: 'status', type: 'number', min: '400', max: '599', placeholder: '403' }),
    file: h('input', { class: 'field', name: 'file', type: 'text', spellcheck: 'false', placeholder: '/srv/mock/answer.json' }),
    directory: h('input', { class: 'field', name: 'directory', type: 'text', spellcheck: 'false', placeholder: '/srv/mock/' }),
    to: h('input', { class: 'field', name: 'to', type: 'text', spellcheck: 'false', placeholder: 'https://staging.example.com/' }),
    address: h('input', { class: 'field', name: 'address', type: 'text', spellcheck: 'false', placeholder: '10.0.0.5' }),
    request: headerEditor('request'),
    response: headerEditor('response'),
  };
  const rowsByKey = {};
  const formTitle = h('div', { class: 'rf-title' }, 'Add a rule');
  const formErr = h('div', { class: 'section-error full', hidden: true });
  const saveBtn = h('button', { type: 'submit', class: 'btn primary', id: 'rule-save', 'data-test': 'rule-save' }, 'Add rule');
  const cancelBtn = h('button', { type: 'button', class: 'btn', hidden: true }, 'Cancel edit');
  const form = h('form', { class: 'rule-form', id: 'rule-form', 'data-test': 'rule-form', autocomplete: 'off' }, formTitle);
  const addRow = (key, label, el, hint) => {
    const l = h('label', { for: 'rf-' + key }, label);
    el.id = 'rf-' + key;
    const wrap = hint ? h('div', { class: 'with-hint' }, el, h('span', { class: 'muted small' }, hint)) : el;
    form.appendChild(l);
    form.appendChild(wrap);
    rowsByKey[key] = [l, wrap];
  };
  addRow('name', 'Name', f.name);
  addRow('match', 'Match', f.match, 'URL pattern (* wildcards), or a filter: ~m POST & ~d api');
  addRow('action', 'Action', f.action);
  addRow('status', 'Status', f.status, '400–599, default 403');
  addRow('file', 'File', f.file, 'absolute path; file or directory');
  addRow('directory', 'Directory', f.directory);
  addRow('to', 'To', f.to);
  addRow('address', 'Address', f.address, 'IP address to dial');
  addRow('request', 'Request edits', f.request);
  addRow('response', 'Response edits', f.response);
  form.appendChild(h('label', { for: 'rf-enabled' }, 'Enabled'));
  f.enabled.id = 'rf-enabled';
  form.appendChild(h('div', null, f.enabled));
  form.appendChild(formErr);
  form.appendChild(h('div', { class: 'full' }, h('span', { class: 'spacer' }), cancelBtn, saveBtn));
  const syncAction = () => {
    const keys = ACTION_KEYS[f.action.value] || [];
    for (const k of ALL_ACTION_KEYS) for (const el of rowsByKey[k]) el.hidden = !keys.includes(k);
  };
  f.action.addEventListener('change', syncAction);
  syncAction();

  function resetForm() {
    editing = -1;
    formTitle.textContent = 'Add a rule';
    saveBtn.textContent = 'Add rule';
    cancelBtn.hidden = true;
    for (const k of ['name', 'match', 'status', 'file', 'directory', 'to', 'address', 'request', 'response']) f[k].value = '';
    f.action.value = 'block';
    f.enabled.checked = true;
    formErr.hidden = true;
    syncAction();
  }
  cancelBtn.addEventListener('click', resetForm);

  function editRule(i) {
    const r = rules[i];
    editing = i;
    formTitle.textContent = 'Edit rule "' + r.name + '"';
    saveBtn.textContent = 'Save rule';
    cancelBtn.hidden = false;
    f.name.value = r.name || '';
    f.match.value = r.match || '';
    if (![...f.action.options].some(o => o.value === r.action)) f.action.appendChild(h('option', { value: r.action }, r.action));
    f.action.value = r.action;
    f.enabled.checked = r.enabled !== false;
    for (const k of ALL_ACTION_KEYS) {
      const v = r[k];
      f[k].value = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v, null, 1) : String(v);
    }
    syncAction();
    f.name.focus();
    form.scrollIntoView({ block: 'nearest' });
  }

  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    formErr.hidden = true;
    // Start from the rule being edited so keys this form does not know are kept.
    const base = editing >= 0 ? { ...rules[editing] } : {};
    for (const k of ALL_ACTION_KEYS) delete base[k];
    const rule = Object.assign(base, { name: f.name.value.trim(), enabled: f.enabled.checked, match: f.match.value.trim(), action: f.action.value });
    try {
      for (const k of ACTION_KEYS[rule.action] || []) {
        const raw = f[k].value.trim();
        if (!raw) continue;
        if (k === 'status') rule.status = Number(raw);
        else if (k === 'request' || k === 'response') {
          try { rule[k] = JSON.parse(raw); } catch (e) { throw new Error(k + ' edits: not valid JSON (' + e.message + ')'); }
        } else rule[k] = raw;
      }
    } catch (e) { formErr.textContent = e.message; formErr.hidden = false; return; }
    if (!rule.name) { formErr.textContent = 'A rule needs a name.'; formErr.hidden = false; f.name.focus(); return; }
    if (!rule.match) { formErr.textContent = 'A rule needs a URL pattern or a filter to match.'; formErr.hidden = false; f.match.focus(); return; }
    const next = editing >= 0 ? rules.map((x, k) => (k === editing ? rule : x)) : rules.concat([rule]);
    saveBtn.disabled = true;
    const ok = await save(next, formErr);
    saveBtn.disabled = false;
    if (ok) { toast(editing >= 0 ? 'Rule saved' : 'Rule added'); resetForm(); }
  });

  // Test a URL against the saved rules.
  const testUrl = h('input', { class: 'field', type: 'text', placeholder: 'https://api.example.com/v1/users', spellcheck: 'false', 'data-test': 'rule-test-url' });
  // The method, for rules whose filter reads it (~m).
  const testMethod = h('select', { class: 'field', 'data-test': 'rule-test-method', title: 'Method' },
    ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].map(m => h('option', { value: m }, m)));
  const testOut = h('div', { class: 'test-result', 'data-test': 'rule-test-result' });
  const runTest = async () => {
    const url = testUrl.value.trim();
    if (!url) return;
    clear(testOut);
    try {
      const res = await api('POST', '/api/rules/test', { url, method: testMethod.value });
      const m = res.matches || [];
      if (!m.length) testOut.appendChild(h('span', { class: 'muted' }, 'No rule matches this URL.'));
      // Every matching rule, and why it applies or not (RuleVerdict: applies, disabled, shadowed, blocked, answered_locally).
      for (const x of m) {
        const why = x.applies ? 'applies' : String(x.reason).replace('_', ' ') + (x.by ? ' by ' + x.by : '');
        testOut.appendChild(h('div', { class: x.applies ? 'rule-applies' : 'muted' }, x.applies ? '✓ ' : '– ', h('b', null, x.name),
          ' → ', h('span', { class: 'mono' }, String(x.action)), ' (' + why + ')'));
      }
    } catch (e) { testOut.appendChild(h('span', { class: 'section-error' }, describeError(e))); }
  };
  testUrl.addEventListener('keydown', e => { if (e.key === 'Enter') runTest(); });

  drawTable();
  const c = card('rules', 'Rules', 'evaluated in order; the first enabled match of each kind applies',
    errEl, tableBox, form,
    h('div', { class: 'test-box' }, h('span', { class: 'muted' }, 'Test'), testMethod, testUrl,
      h('button', { type: 'button', class: 'btn', onclick: runTest, 'data-test': 'rule-test' }, 'Test')),
    testOut);
  c.classList.add('span2');
  return c;
}
