// Settings view (SSL proxying, rules, breakpoints, pinned hosts, upstream proxy) and the
// Status view (the readiness card). Rules are read generically: name, enabled, match and
// action are shown; every other key of a rule is passed back unchanged.
'use strict';

(function () {
  const { h, $, api, clear } = BM;
  const root = $('#view-settings');
  let settings = null;
  let loading = false;

  // The action-specific keys the rule form knows (settings.json's rule format).
  const ACTION_KEYS = {
    block: ['status'], drop: [], map_local: ['file', 'directory'], map_remote: ['to'],
    host_override: ['address'], headers: ['request', 'response'],
  };
  const ALL_ACTION_KEYS = ['status', 'file', 'directory', 'to', 'address', 'request', 'response'];

  async function load() {
    if (loading) return;
    loading = true;
    if (!settings) { clear(root).appendChild(h('div', { class: 'page muted' }, 'Loading settings…')); }
    try {
      settings = await api('GET', '/api/settings');
      render();
    } catch (e) {
      clear(root).appendChild(h('div', { class: 'page' }, h('div', { class: 'notice error' }, 'Could not load the settings: ' + e.message)));
    } finally { loading = false; }
  }

  function sectionError(el, err) {
    clear(el);
    el.hidden = !err;
    if (err) el.textContent = BM.describeError(err);
  }

  function card(id, title, sub, ...body) {
    return h('section', { class: 'card', id },
      h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, title), sub ? h('span', { class: 'muted small' }, sub) : null),
      ...body);
  }

  /** An editable list of strings: items with ×, plus an add box. onChange(newList). */
  function listEditor(title, items, placeholder, onChange, testName) {
    const box = h('div', { class: 'list-editor', 'data-test': testName || null });
    const draw = () => {
      clear(box);
      box.appendChild(h('div', { class: 'le-title' }, title));
      if (!items.length) box.appendChild(h('div', { class: 'le-empty' }, 'none'));
      items.forEach((it, i) => {
        box.appendChild(h('div', { class: 'le-item' }, h('span', { class: 'le-text', title: it }, it),
          h('button', { type: 'button', class: 'icon-btn del', title: 'Remove', 'aria-label': 'Remove ' + it, onclick: () => {
            items = items.filter((_, k) => k !== i); onChange(items); draw();
          } }, '×')));
      });
      const input = h('input', { class: 'field', type: 'text', placeholder, spellcheck: 'false' });
      const add = () => {
        const v = input.value.trim();
        if (!v) return;
        items = items.concat([v]);
        onChange(items);
        draw();
        box.querySelector('.le-add input').focus();
      };
      input.addEventListener('keydown', e => { if (e.key === 'Enter') { e.preventDefault(); add(); } });
      box.appendChild(h('div', { class: 'le-add' }, input, h('button', { type: 'button', class: 'btn small', onclick: add }, 'Add')));
    };
    draw();
    return box;
  }

  /**
   * Header edits as a form: rows of (set | add | remove, name, value). Its `value` is the
   * rule's JSON text ({"remove": [...], "set": {...}, "add": {...}}), so the rule form reads
   * and writes it as it did the old text box; an object it cannot show stays JSON text.
   */
  function headerEditor(side) {
    const box = h('div', { class: 'header-editor', 'data-test': 'header-editor-' + side });
    const rowsBox = h('div', { class: 'he-rows' });
    const raw = h('textarea', { class: 'field', spellcheck: 'false', hidden: true });
    let rawMode = false;
    const addRow = (op, name, value) => {
      const opSel = h('select', { class: 'field he-op', 'data-test': 'he-op' }, ['set', 'add', 'remove'].map(o => h('option', { value: o }, o)));
      opSel.value = op || 'set';
      const nameIn = h('input', { class: 'field he-name', type: 'text', spellcheck: 'false', placeholder: 'X-Debug', value: name || '', 'data-test': 'he-name' });
      const valueIn = h('input', { class: 'field he-value', type: 'text', spellcheck: 'false', placeholder: 'value', value: value || '', 'data-test': 'he-value' });
      const sync = () => { valueIn.hidden = opSel.value === 'remove'; };
      opSel.addEventListener('change', sync);
      sync();
      const row = h('div', { class: 'he-row' }, opSel, nameIn, valueIn,
        h('button', { type: 'button', class: 'icon-btn del', title: 'Remove this edit', 'aria-label': 'Remove this edit', onclick: () => row.remove() }, '×'));
      rowsBox.appendChild(row);
      return row;
    };
    box.appendChild(rowsBox);
    box.appendChild(raw);
    box.appendChild(h('button', { type: 'button', class: 'btn small', 'data-test': 'he-add-' + side, onclick: () => addRow('set').querySelector('.he-name').focus() }, '+ Header edit'));
    const text = () => {
      if (rawMode) return raw.value;
      const edits = {};
      for (const row of rowsBox.children) {
        const op = row.querySelector('.he-op').value;
        const name = row.querySelector('.he-name').value.trim();
        if (!name) continue;
        if (op === 'remove') (edits.remove = edits.remove || []).push(name);
        else (edits[op] = edits[op] || {})[name] = row.querySelector('.he-value').value;
      }
      return Object.keys(edits).length ? JSON.stringify(edits) : '';
    };
    const show = t => {
      clear(rowsBox);
      rawMode = false;
      raw.hidden = true;
      let e = null;
      try { e = t ? JSON.parse(t) : {}; } catch (_) { e = null; }
      const known = e && typeof e === 'object' && !Array.isArray(e) && Object.keys(e).every(k => ['set', 'add', 'remove'].includes(k))
        && (!e.remove || Array.isArray(e.remove)) && ['set', 'add'].every(k => !e[k] || (typeof e[k] === 'object' && !Array.isArray(e[k])));
      if (!known) { rawMode = true; raw.hidden = false; raw.value = t; return; }
      for (const n of e.remove || []) addRow('remove', String(n), '');
      for (const op of ['set', 'add']) for (const [n, v] of Object.entries(e[op] || {})) addRow(op, n, String(v));
    };
    Object.defineProperty(box, 'value', { get: text, set: show });
    return box;
  }

  function saveBar(onSave, label) {
    const err = h('div', { class: 'section-error', hidden: true });
    const ok = h('span', { class: 'section-ok' });
    const btn = h('button', { type: 'button', class: 'btn primary' }, label || 'Save');
    const dirty = h('span', { class: 'muted small' });
    btn.addEventListener('click', async () => {
      btn.disabled = true;
      ok.textContent = '';
      try {
        await onSave();
        sectionError(err, null);
        ok.textContent = 'Saved ✓';
        dirty.textContent = '';
        setTimeout(() => { ok.textContent = ''; }, 2500);
      } catch (e) { sectionError(err, e); } finally { btn.disabled = false; }
    });
    return { err, foot: h('div', { class: 'card-foot' }, dirty, h('span', { class: 'spacer' }), ok, btn), btn, markDirty: () => { dirty.textContent = 'Unsaved changes'; } };
  }

  // ---------------------------------------------------------------- sections
  function sslSection() {
    // settings.json's ssl_proxying: include, exclude, insecure_upstream, auto_pin (and keys this page does not edit, kept).
    const ssl = Object.assign({ include: [], exclude: [] }, settings.ssl_proxying || {});
    const work = { ...ssl, include: [...(ssl.include || [])], exclude: [...(ssl.exclude || [])], insecure_upstream: [...(ssl.insecure_upstream || [])] };
    if (!work.insecure_upstream.length && !ssl.insecure_upstream) delete work.insecure_upstream;
    const bar = saveBar(async () => {
      await api('PUT', '/api/settings/ssl-proxying', work);
      settings.ssl_proxying = { ...work };
    });
    const autoPin = h('input', { type: 'checkbox', checked: ssl.auto_pin !== false, 'data-test': 'ssl-auto-pin' });
    autoPin.addEventListener('change', () => { work.auto_pin = autoPin.checked; bar.markDirty(); });
    const pinLoopback = h('input', { type: 'checkbox', checked: ssl.pin_loopback === true, 'data-test': 'ssl-pin-loopback' });
    pinLoopback.addEventListener('change', () => { work.pin_loopback = pinLoopback.checked; bar.markDirty(); });
    const trust = h('input', { class: 'field', type: 'text', spellcheck: 'false', placeholder: '/etc/ssl/staging-ca.pem', value: ssl.upstream_trust || '',
      'data-test': 'ssl-upstream-trust', title: "An origin's own CA (PEM, absolute path on the appliance), trusted beside the system store" });
    trust.addEventListener('input', () => { const v = trust.value.trim(); if (v) work.upstream_trust = v; else delete work.upstream_trust; bar.markDirty(); });
    return card('ssl-proxying', 'SSL proxying', 'which hosts are decrypted (MITM); exclude wins',
      h('div', { class: 'card-body' },
        listEditor('Include', work.include, '*.example.com', v => { work.include = v; bar.markDirty(); }, 'ssl-include'),
        listEditor('Exclude', work.exclude, 'bank.example.com', v => { work.exclude = v; bar.markDirty(); }, 'ssl-exclude'),
        listEditor('Upstream certificate not verified', work.insecure_upstream || [], 'self-signed.internal',
          v => { work.insecure_upstream = v; bar.markDirty(); }, 'ssl-insecure'),
        h('label', { class: 'check' }, autoPin, 'Pass a host through when its client refuses our certificate (auto-pin)'),
        h('label', { class: 'check' }, pinLoopback, 'Let clients on this machine (127.0.0.1) pin too (off: a local curl without the CA never pins)'),
        h('label', { class: 'stack' }, h('span', null, 'Upstream CA (trusted beside the system store)'), trust)),
      bar.err, bar.foot);
  }

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

  function rulesSection() {
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
              if (await BM.confirm('Delete rule "' + r.name + '"?', 'The rule is removed from settings.json.', 'Delete')) save(rules.filter((_, k) => k !== i));
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
      if (ok) { BM.toast(editing >= 0 ? 'Rule saved' : 'Rule added'); resetForm(); }
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
      } catch (e) { testOut.appendChild(h('span', { class: 'section-error' }, BM.describeError(e))); }
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

  function breakpointsSection() {
    // settings.json's {"request": [...], "response": [...], "timeout_seconds": N}: every array-valued
    // key is shown as a list, other keys are kept (the API refuses a key breakpoints do not have).
    const bp = settings.breakpoints && typeof settings.breakpoints === 'object' ? { ...settings.breakpoints } : {};
    for (const k of ['request', 'response']) if (!Array.isArray(bp[k])) bp[k] = [];
    const keys = Object.keys(bp).filter(k => Array.isArray(bp[k]));
    const bar = saveBar(async () => {
      await api('PUT', '/api/settings/breakpoints', bp);
      settings.breakpoints = { ...bp };
    });
    const body = h('div', { class: 'card-body' },
      h('div', { class: 'muted small' }, 'Exchanges that a URL pattern or a filter (~m POST & ~d api) matches pause here; continue, edit or abort them from the Held panel.'));
    for (const k of keys) {
      const title = k === 'patterns' ? 'URL patterns' : k === 'request' ? 'Pause requests matching' : k === 'response' ? 'Pause responses matching' : k;
      body.appendChild(listEditor(title, bp[k].map(String), 'https://api.example.com/v1/*', v => { bp[k] = v; bar.markDirty(); }, 'bp-' + k));
    }
    for (const k of Object.keys(bp).filter(x => !Array.isArray(bp[x]))) {
      body.appendChild(h('div', { class: 'muted small' }, k + ': ' + JSON.stringify(bp[k])));
    }
    return card('breakpoints-settings', 'Breakpoints', null, body, bar.err, bar.foot);
  }

  function pinnedSection() {
    const errEl = h('div', { class: 'section-error', hidden: true });
    const box = h('div');
    const draw = () => {
      clear(box);
      const pins = settings.pinned || [];
      if (!pins.length) { box.appendChild(h('div', { class: 'card-body muted' }, 'No pinned hosts. A host is pinned (passed through without MITM) when its TLS handshake fails because the client pins its certificate.')); return; }
      const tb = h('tbody');
      for (const p of pins) {
        const host = typeof p === 'string' ? p : p.host;
        tb.appendChild(h('tr', { 'data-host': host },
          h('td', { class: 'mono' }, host),
          h('td', { class: 'muted' }, (p && p.reason) || ''),
          h('td', { class: 'muted', title: (p && p.pinned_at) || '' }, p && p.pinned_at ? BM.fmtAgo(p.pinned_at) : ''),
          h('td', { class: 'act' }, h('button', { type: 'button', class: 'btn small', 'data-test': 'unpin', onclick: async () => {
            try {
              await api('DELETE', '/api/pinned/' + encodeURIComponent(host));
              settings.pinned = (settings.pinned || []).filter(x => (typeof x === 'string' ? x : x.host) !== host);
              sectionError(errEl, null);
              draw();
            } catch (e) { sectionError(errEl, e); }
          } }, 'Unpin'))));
      }
      box.appendChild(h('table', { class: 'rules-table' }, h('thead', null, h('tr', null, h('th', null, 'Host'), h('th', null, 'Reason'), h('th', null, 'Pinned'), h('th', null, ''))), tb));
    };
    draw();
    return card('pinned', 'Pinned hosts', 'passed through without MITM', errEl, box);
  }

  function upstreamSection() {
    // settings.json's upstream_proxy: {host, port, username, password, bypass}, or null to dial directly.
    const v = settings.upstream_proxy && typeof settings.upstream_proxy === 'object' ? settings.upstream_proxy : null;
    const field = (name, type, placeholder, value) => h('input', { class: 'field', type, name, spellcheck: 'false', placeholder,
      value: value === undefined || value === null ? '' : String(value), 'data-test': 'upstream-' + name, autocomplete: 'off' });
    const host = field('host', 'text', 'proxy.example.com (empty: connect directly)', v && v.host);
    const port = field('port', 'number', '3128', v && v.port);
    const user = field('username', 'text', 'optional', v && v.username);
    const pass = field('password', 'password', v && v.password ? '(unchanged)' : 'optional', '');
    const bypass = field('bypass', 'text', '*.internal, localhost', v && Array.isArray(v.bypass) ? v.bypass.join(', ') : '');
    const bar = saveBar(async () => {
      let val = null;
      if (host.value.trim()) {
        // Keys this form does not know are kept.
        val = Object.assign({}, v || {}, { host: host.value.trim(), port: Number(port.value) });
        if (user.value.trim()) val.username = user.value.trim(); else delete val.username;
        if (pass.value) val.password = pass.value; else if (!val.username) delete val.password;
        const list = bypass.value.split(',').map(x => x.trim()).filter(Boolean);
        if (list.length) val.bypass = list; else delete val.bypass;
      }
      await api('PUT', '/api/settings/upstream-proxy', val);
      settings.upstream_proxy = val;
    });
    for (const el of [host, port, user, pass, bypass]) {
      el.addEventListener('input', bar.markDirty);
      el.addEventListener('keydown', e => { if (e.key === 'Enter') bar.btn.click(); });
    }
    const row = (label, el) => h('label', { class: 'form-row' }, h('span', { class: 'muted' }, label), el);
    return card('upstream', 'Upstream proxy', 'every upstream dial goes through it, but for the bypass hosts',
      h('div', { class: 'card-body upstream-form' }, row('Host', host), row('Port', port), row('User', user), row('Password', pass), row('Bypass', bypass)),
      bar.err, bar.foot);
  }

  function rawSection() {
    const pre = h('pre', { class: 'raw-settings' }, settings.text || '');
    const c = card('settings-raw', 'settings.json', 'read-only; hot-reloaded on every save',
      h('details', null, h('summary', { class: 'card-body' }, 'Show the file'), pre));
    c.classList.add('span2');
    return c;
  }

  /** A file that does not parse: what is shown instead, and why a save is refused until it is fixed. */
  function inForceNotice() {
    if (settings.valid !== false) return null;
    const shown = settings.in_force === 'last_good'
      ? 'Shown below: the last good settings, the ones in force.'
      : 'No good version was read since the web front started; shown below: the defaults.';
    return h('div', { class: 'notice error settings-invalid', 'data-test': 'settings-in-force' },
      h('b', null, BM.settingsProblem(settings.error)), ' ', shown, ' Saving here is refused until the file is fixed (busymate status says the same).');
  }

  function render() {
    clear(root);
    const page = h('div', { class: 'page' },
      h('div', { class: 'page-title' }, 'Settings',
        h('button', { type: 'button', class: 'btn small', onclick: load, title: 'Reload from the server' }, '↻ Reload')),
      inForceNotice(),
      h('div', { class: 'cards' }, sslSection(), upstreamSection(), rulesSection(), breakpointsSection(), pinnedSection(), rawSection()));
    root.appendChild(page);
  }

  BM.settings = { load };

  // ================================================================ Status view
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

  function row(color, name, ...val) {
    return h('div', { class: 'ready-row' }, h('span', { class: 'dot ' + color }), h('span', { class: 'rr-name' }, name), h('div', { class: 'rr-val' }, ...val));
  }

  const stateColor = s => (s === 'ready' ? 'green' : s === 'stopped' || s === 'failed' ? 'red' : s ? 'amber' : 'grey');

  /**
   * The readiness card's rows and the one verdict both the Status view and the Traffic view's
   * status bar show: red anywhere is "Not ready"; amber with the tunnel ready is "Ready, with
   * warnings" (a broken settings.json is one: the last good settings stay in force and proxying
   * goes on); the tunnel not ready yet is "Not ready" too.
   */
  function assess(st) {
    const rows = [];
    const colors = [];
    const add = (c, ...rest) => { colors.push(c); rows.push(row(c, ...rest)); };
    const sup = st.supervisor || {};
    add(sup.running ? 'green' : 'red', 'Supervisor', sup.running ? 'running' : 'not running',
      sup.pid ? h('span', { class: 'muted' }, ' · pid ' + sup.pid) : null,
      sup.uptime_seconds !== undefined ? h('span', { class: 'muted' }, ' · up ' + BM.fmtUptime(sup.uptime_seconds)) : null);
    const tun = st.tunnel || {};
    add(stateColor(tun.state), 'Tunnel', tun.state || 'unknown',
      tun.pid ? h('span', { class: 'muted' }, ' · pid ' + tun.pid) : null,
      h('span', { class: 'muted' }, ' · ' + (tun.restarts || 0) + ' restart' + (tun.restarts === 1 ? '' : 's')),
      tun.last_exit ? h('div', { class: 'rr-warn' }, 'last exit: ' + (typeof tun.last_exit === 'object' ? JSON.stringify(tun.last_exit) : tun.last_exit)) : null);
    const web = st.web || {};
    add(stateColor(web.state), 'Web', web.state || 'unknown', web.pid ? h('span', { class: 'muted' }, ' · pid ' + web.pid) : null,
      h('span', { class: 'muted' }, ' · ' + (web.restarts || 0) + ' restart' + (web.restarts === 1 ? '' : 's')));
    add(st.mode ? 'green' : 'grey', 'Mode', st.mode === 'transparent' ? 'transparent (VPN-style, nftables redirect)' : st.mode === 'proxy' ? 'proxy (explicit HTTP proxy, PAC)' : String(st.mode || 'unknown'));
    const ls = st.listeners || [];
    const lsBad = ls.some(l => l.error);
    const lsWarn = ls.some(l => l.warning);
    const lsAllBad = ls.length && ls.every(l => l.error);
    add(!ls.length ? 'amber' : lsAllBad ? 'red' : lsBad || lsWarn ? 'amber' : 'green', 'Listeners',
      ls.length ? ls.map(l => h('div', null, h('span', { class: 'mono' }, l.address),
        l.bound && l.bound !== l.address ? h('span', { class: 'muted mono' }, ' → ' + l.bound) : null,
        l.error ? h('span', { class: 'rr-err' }, ' ✗ ' + l.error) : l.bound ? h('span', { class: 'muted' }, ' ✓ listening') : null,
        l.warning ? h('span', { class: 'rr-warn' }, ' ⚠ ' + l.warning) : null)) : 'none configured');
    const ca = st.ca || {};
    add(ca.error || !ca.present ? 'red' : ca.trusted ? 'green' : 'amber', 'CA certificate',
      ca.error ? h('div', { class: 'rr-err' }, ca.error) : null,
      h('div', null, ca.present ? 'present' : 'missing', ' · ', ca.trusted ? 'trusted by this system' : h('span', { class: 'rr-warn' }, 'not trusted by this system'),
        ' · ', h('a', { href: '/ca.pem', download: '', 'data-test': 'download-ca' }, 'Download CA')),
      ca.subject ? h('div', { class: 'muted' }, ca.subject + (ca.not_after ? ' · valid until ' + String(ca.not_after).slice(0, 10) : '')) : null,
      ca.fingerprint_sha256 ? h('div', { class: 'mono muted', title: 'SHA-256 fingerprint' }, ca.fingerprint_sha256) : null);
    const se = st.settings || {};
    add(se.valid === false || (se.unknown_keys && se.unknown_keys.length) ? 'amber' : 'green', 'Settings',
      se.valid === false ? h('div', { class: 'rr-warn', 'data-test': 'settings-invalid' }, BM.settingsProblem(se.error) + ' The last good settings stay in force.') : 'valid',
      se.path ? h('div', { class: 'mono muted' }, se.path) : null,
      se.unknown_keys && se.unknown_keys.length ? h('div', { class: 'rr-warn' }, 'unknown keys: ' + se.unknown_keys.join(', ')) : null);
    const cloud = st.cloud;
    if (cloud && (cloud.state !== 'not paired' || (cloud.sinks || []).length)) {
      // Seed 000's pairing: paired, re-pair soon, re-pair required; each sink's backlog and last push.
      const color = cloud.state === 're-pair required' ? 'red' : cloud.expiring_soon || (cloud.sinks || []).some(s => s.state === 'backing off' || s.state === 'refused') ? 'amber' : 'green';
      add(color, 'Cloud', h('span', { 'data-test': 'cloud-state' }, cloud.detail),
        cloud.name || cloud.api ? h('div', { class: 'muted' }, (cloud.name ? '"' + cloud.name + '"' : '') + (cloud.api ? ' on ' + cloud.api : '')) : null,
        ...(cloud.sinks || []).map(s => h('div', { class: 'muted', 'data-test': 'cloud-sink' },
          s.sink + ' → ' + (s.target || '?') + ': ' + s.state + ' · backlog ' + BM.fmtInt(s.backlog || 0) + ' · ' + BM.fmtInt(s.sent_rows || 0) + ' sent' +
          (s.last_push_at ? ' · last push ' + BM.fmtTime(s.last_push_at) : '') +
          (s.dropped_unsent ? ' · ' + BM.fmtInt(s.dropped_unsent) + ' dropped by retention unsent' : ''),
          s.last_error && s.state !== 'idle' && s.state !== 'sending' ? h('span', { class: 'rr-warn' }, ' · ' + s.last_error) : null)),
        ...(cloud.sinks || []).filter(s => s.realtime).map(s => h('div', { class: 'muted', 'data-test': 'cloud-realtime' }, 'Realtime: ' + s.realtime)));
    }
    const store = st.store || {};
    add('green', 'Store', BM.fmtInt(store.exchanges) + ' exchanges', h('span', { class: 'muted' }, ' · last id ' + BM.fmtInt(store.last_id)));
    const network = networkCard(st);
    colors.push(...network.colors);

    const overall = colors.includes('red') ? 'red' : colors.includes('amber') ? 'amber' : 'green';
    const headline = overall === 'red' || tun.state !== 'ready' ? 'Not ready' : overall === 'amber' ? 'Ready, with warnings' : 'Ready — capturing';
    return { rows, network, overall, headline, tun, ls };
  }

  function renderStatus(st, rps) {
    clear(sroot);
    const page = h('div', { class: 'page' });
    sroot.appendChild(page);
    page.appendChild(h('div', { class: 'page-title' }, 'Status', st ? h('span', { class: 'muted small' }, 'updated ' + BM.fmtTime(new Date().toISOString())) : null));
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
      const txt = typeof v === 'number' ? (Number.isInteger(v) ? BM.fmtInt(v) : v.toFixed(1)) : v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v);
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

  /** The onboarding page's address when its listener is bound (an unspecified host: this page's). */
  function onboardingURL(st) {
    const ob = st && st.web && st.web.onboarding;
    if (!ob || !ob.bound) return null;
    let host = String(ob.bound);
    const m = /^(0\.0\.0\.0|\[::\]|::):(\d+)$/.exec(host);
    if (m) host = (location.hostname.includes(':') ? '[' + location.hostname + ']' : location.hostname) + ':' + m[2];
    return 'http://' + host + '/';
  }

  function link(text, onclick, test) {
    return h('a', { href: '#', 'data-test': test || null, onclick: e => { e.preventDefault(); onclick(); } }, text);
  }

  /** The network: mode as configured and live, the nftables rules, what was refused, DNS, warnings, onboarding. */
  function networkCard(st) {
    const n = st.network;
    const rows = [];
    const colors = [];
    const add = (c, ...rest) => { colors.push(c); rows.push(row(c, ...rest)); };
    if (n) {
      const live = n.live_mode || n.mode;
      add(live === n.mode ? 'green' : 'amber', 'Mode', h('b', null, n.mode || '?'), ' configured',
        h('span', { class: 'muted' }, ' · live '), h('b', { 'data-test': 'live-mode' }, live || '?'),
        n.both_seen ? h('span', { class: 'tag' }, 'proxy clients too') : null,
        h('div', { class: 'muted small' }, n.mode === 'transparent'
          ? 'nftables redirects TCP 80/443 and DNS to the tunnel; devices route through this machine.'
          : 'Clients set the proxy (or the PAC URL); nothing is redirected.'));
      const rules = String(n.rules || 'off');
      const rulesErr = rules.startsWith('error');
      add(rulesErr ? 'red' : rules === 'installed' ? 'green' : n.mode === 'transparent' ? 'amber' : 'grey', 'Rules',
        h('span', { class: rulesErr ? 'rr-err' : null, 'data-test': 'network-rules' }, rules),
        h('span', { class: 'muted' }, ' · nftables table inet ' + (n.table || 'busymate')));
      for (const w of n.warnings || []) add('amber', 'Warning', h('span', { class: 'rr-warn' }, w));
    } else {
      rows.push(row('grey', 'Network', h('span', { class: 'muted' }, 'not reported (the tunnel is not running)')));
    }
    const ob = st.web && st.web.onboarding;
    const url = onboardingURL(st);
    if (ob && ob.error) add('red', 'Onboarding', h('span', { class: 'rr-err' }, 'cannot listen on ' + ob.listen + ': ' + ob.error));
    else if (url) {
      add('green', 'Onboarding', h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono', 'data-test': 'onboarding-url' }, url),
        h('div', { class: 'muted small' }, 'Open it on a device: the PAC file (/proxy.pac) and the CA (/ca.pem, /ca.der), no token.'));
      // A PAC it would refuse: no proxy listener serves the devices it reaches.
      if (ob.warning) add('amber', 'Warning', h('span', { class: 'rr-warn', 'data-test': 'onboarding-warning' }, ob.warning));
    } else if (ob) add('amber', 'Onboarding', 'listening on ' + ob.listen + ' …');
    else rows.push(row('grey', 'Onboarding', h('span', { class: 'muted' }, 'off · set onboarding.listen to serve the setup page to devices')));
    if (n) {
      const counter = (v, name, title, extra, warn) => h('div', { class: 'counter' + (warn ? ' warn' : ''), title },
        h('div', { class: 'cv' }, BM.fmtInt(v || 0), extra || null), h('div', { class: 'cn' }, name));
      rows.push(h('div', { class: 'counters net-counters' },
        counter(n.quic_rejected, 'QUIC rejected', 'UDP/443 refused (transparent mode), so clients fall back to TCP'),
        counter(n.refused, 'refused clients', 'Clients refused at accept: not on loopback and not in access.allow', null, n.refused > 0),
        counter(n.dns_queries, 'DNS queries', 'Answered by the forwarder (transparent mode)',
          n.dns_queries > 0 ? h('span', { class: 'cv-link' }, link('show', () => BM.app.showFilter('~dns'), 'show-dns')) : null)));
    }
    const el = h('section', { class: 'card', id: 'network-card', 'data-test': 'network-card' },
      h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Network'), h('span', { class: 'muted small' }, 'mode, rules, devices arriving')),
      ...rows);
    return { el, colors };
  }

  /** Seed 004's readiness per device, in the status view: its steps and presence. */
  function devicesCard(st) {
    const devs = st.devices || [];
    const online = devs.filter(d => d.online).length;
    const body = devs.length
      ? devs.slice(0, 8).map(d => h('div', { class: 'ready-row dev-mini', 'data-device': d.name },
        h('span', { class: 'dot ' + (d.online ? 'green' : 'grey') }),
        h('span', { class: 'rr-name' }, link(d.name, () => BM.app.showDevice(d.name))),
        h('div', { class: 'rr-val' }, steps(d))))
      : [h('div', { class: 'card-body muted' }, 'No devices yet: ', h('code', null, 'busymate devices add NAME'))];
    return h('section', { class: 'card', id: 'status-devices', 'data-test': 'status-devices' },
      h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Devices'),
        h('span', { class: 'muted small' }, devs.length ? online + ' of ' + devs.length + ' online' : ''),
        h('span', { class: 'spacer' }), link(devs.length > 8 ? 'All ' + devs.length + ' →' : 'Open →', () => BM.app.setView('devices'))),
      ...body);
  }

  // ================================================================ Devices view
  /** A device's readiness steps (seed 004's paired / CA trusted / PAC / port, as Busymate has them). */
  function deviceSteps(d) {
    const how = d.port ? 'port ' + d.port : d.named ? 'by address' : null;
    const until = d.admitted_until ? 'Admitted until ' + BM.fmtDateTime(d.admitted_until) : null;
    return [
      { key: 'enrolled', label: 'enrolled', ok: !!d.enrolled_at,
        title: d.enrolled_at ? 'Opened its enrolment link ' + BM.fmtDateTime(d.enrolled_at) + ' (' + d.enrolment + ')'
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
        title: d.ca_trusted_at ? 'Completed an intercepted TLS handshake ' + BM.fmtDateTime(d.ca_trusted_at) + ': it trusts the CA'
          : 'No intercepted TLS handshake completed yet (since the tunnel started): install and trust the CA on the device' },
      { key: 'traffic', label: 'traffic seen', ok: !!d.last_seen,
        title: d.last_seen ? 'Last traffic ' + BM.fmtDateTime(d.last_seen) + (d.source ? ' by ' + d.source : '') : 'No traffic yet' },
      { key: 'online', label: 'online', ok: !!d.online, title: d.online ? 'Traffic within the idle window' : 'No traffic within the idle window' },
    ];
  }

  function steps(d) {
    return h('span', { class: 'steps' }, deviceSteps(d).map(x =>
      h('span', { class: 'step ' + (x.ok ? 'ok' : 'no'), 'data-step': x.key, 'data-ok': String(x.ok), title: x.title }, x.label)));
  }

  const droot = $('#view-devices');
  const DV = { built: false, rows: new Map() };

  function buildDevices() {
    clear(droot);
    DV.sub = h('span', { class: 'muted small', 'data-test': 'devices-sub' });
    DV.tbody = h('tbody');
    DV.table = h('section', { class: 'card', id: 'devices-card' },
      h('table', { class: 'devices-table', 'data-test': 'devices-table' },
        h('thead', null, h('tr', null, ['', 'Device', 'Identified by', 'Address', 'Last seen', 'Source', 'Today', 'Readiness', '', ''].map(x => h('th', null, x)))),
        DV.tbody),
      DV.foot = h('div', { class: 'card-foot muted small' }));
    DV.empty = h('div', { class: 'empty-card devices-empty', 'data-test': 'devices-empty' });
    DV.page = h('div', { class: 'page' },
      h('div', { class: 'page-title' }, 'Devices', DV.sub),
      enrolCard(), DV.table, DV.empty);
    droot.appendChild(DV.page);
    DV.rows = new Map();
    DV.built = true;
  }

  /** Adds a device and shows its enrolment link once, with its QR code (only a digest is kept). */
  function enrolCard() {
    DV.enrolName = h('input', { type: 'text', placeholder: 'device name, e.g. pixel-8', maxlength: '64', 'data-test': 'enrol-name', 'aria-label': 'Device name' });
    DV.enrolOut = h('div', { class: 'enrol-out', 'data-test': 'enrol-out' });
    const form = h('form', { class: 'enrol-form', 'data-test': 'enrol-form' }, DV.enrolName,
      h('button', { type: 'submit', class: 'btn primary', 'data-test': 'enrol-add' }, 'Add and get a link'));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      const name = DV.enrolName.value.trim();
      if (name) issueLink('POST', '/api/devices', { name });
    });
    return DV.enrolCardEl = h('section', { class: 'card enrol-card', id: 'enrol-card', 'data-test': 'enrol-card' },
      h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, 'Enrol a device'),
        h('span', { class: 'muted small' }, 'one link per device: opened on it, it is admitted, named, and given its PAC and the CA')),
      h('div', { class: 'card-body' }, form, DV.enrolOut));
  }

  async function issueLink(method, path, body) {
    const out = clear(DV.enrolOut);
    out.appendChild(h('span', { class: 'muted' }, 'issuing…'));
    try {
      const r = await BM.api(method, path, body);
      BM.append(clear(out), [
        h('img', { class: 'enrol-qr', src: 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(r.qr_svg || ''), alt: 'QR code of the enrolment link for ' + r.name, 'data-test': 'enrol-qr' }),
        h('div', null,
          h('div', null, h('b', null, r.name), r.port ? ' · port ' + r.port : '', ' · open on the device until ' + BM.fmtDateTime(r.expires)),
          h('a', { href: r.link, class: 'mono', target: '_blank', rel: 'noopener', 'data-test': 'enrol-link' }, r.link),
          h('p', { class: 'muted small' }, 'Shown once: only a digest of it is kept. One device can open it; New link replaces it, Revoke withdraws it.'),
          r.loopback_only ? h('p', { class: 'warn small' }, 'The onboarding listener is on loopback: other machines cannot open this link.') : null),
      ]);
    } catch (e) {
      BM.append(clear(out), [h('span', { class: 'error', 'data-test': 'enrol-error' }, (e.data && e.data.error) || e.message || String(e))]);
    }
  }

  function addHelp(url) {
    return [
      h('p', null, 'Name a device so its traffic is labelled and its presence shows here live. Give it its own proxy port (from devices.port_pool):'),
      h('pre', { class: 'cmd' }, 'busymate devices add NAME'),
      h('p', null, 'or know it by its address:'),
      h('pre', { class: 'cmd' }, 'busymate devices add NAME --address 192.0.2.7'),
      url ? h('p', null, 'Or open the onboarding page on the device (the PAC file and the CA, no token): ',
        h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono', 'data-test': 'devices-onboarding-url' }, url))
        : h('p', { class: 'muted' }, 'Set onboarding.listen (e.g. "0.0.0.0:8080") to serve a setup page to devices: /proxy.pac, /ca.pem, /ca.der.'),
    ];
  }

  function fillDeviceRow(tr, d) {
    const c = tr._c;
    tr.dataset.online = String(!!d.online);
    tr.classList.toggle('offline', !d.online);
    c.dot.className = 'dot ' + (d.online ? 'green' : 'grey');
    c.dot.title = d.online ? 'online' : 'offline';
    c.state.textContent = d.online ? 'online' : 'offline';
    if (c.name.textContent !== d.name) c.name.textContent = d.name;
    c.named.hidden = !!d.named;
    const ident = d.port ? 'port ' + d.port : d.named ? 'by address' : 'not named';
    if (c.ident.textContent !== ident) c.ident.textContent = ident;
    c.ident.classList.toggle('muted', !d.named);
    c.addr.textContent = d.address || '—';
    c.last.textContent = d.last_seen ? BM.fmtAgo(d.last_seen) : 'never';
    c.last.title = d.last_seen ? BM.fmtDateTime(d.last_seen) : '';
    clear(c.source).appendChild(d.source ? h('span', { class: 'src-pill ' + d.source, 'data-test': 'device-source' }, d.source) : h('span', { class: 'muted' }, '—'));
    c.today.textContent = BM.fmtInt(d.exchanges_today || 0);
    clear(c.steps).appendChild(steps(d));
    // Revoke only a link there is to revoke.
    if (c.revoke) c.revoke.hidden = !d.enrolment || d.enrolment === 'revoked';
  }

  function createDeviceRow(d) {
    const c = {};
    const tr = h('tr', { class: 'device-row', tabindex: '0', 'data-device': d.name, title: 'Show ' + d.name + '\'s traffic' },
      h('td', { class: 'dv-dot' }, c.dot = h('span', { class: 'dot' })),
      h('td', { class: 'dv-name' }, c.name = h('b', { 'data-test': 'device-name' }), ' ', c.named = h('span', { class: 'tag', title: 'Seen on the network, not named' }, 'seen'),
        h('div', { class: 'dv-state muted small' }, c.state = h('span', { 'data-test': 'device-state' }))),
      c.ident = h('td', { class: 'dv-ident' }),
      c.addr = h('td', { class: 'dv-addr mono' }),
      c.last = h('td', { class: 'dv-last' }),
      c.source = h('td', { class: 'dv-source' }),
      c.today = h('td', { class: 'dv-today num', 'data-test': 'device-today' }),
      c.steps = h('td', { class: 'dv-steps' }),
      c.actions = h('td', { class: 'dv-actions' }),
      h('td', { class: 'dv-go', 'aria-hidden': 'true' }, '›'));
    tr._c = c;
    if (d.named) {
      const act = (label, test, run) => {
        const b = h('button', { type: 'button', class: 'btn small', 'data-test': test }, label);
        b.addEventListener('click', ev => { ev.stopPropagation(); run(); });
        return b;
      };
      const path = '/api/devices/' + encodeURIComponent(d.name);
      BM.append(c.actions, [
        c.newLink = act('New link', 'device-new-link', () => { issueLink('POST', path + '/link'); DV.enrolCardEl && DV.enrolCardEl.scrollIntoView({ block: 'nearest' }); }),
        c.revoke = act('Revoke', 'device-revoke', async () => {
          if (!confirm('Revoke ' + d.name + '\'s enrolment link? The admission it gave ends.')) return;
          try { await BM.api('POST', path + '/revoke'); } catch (e) { alert((e.data && e.data.error) || String(e)); }
        }),
      ]);
    }
    const go = () => BM.app.showDevice(tr.dataset.device);
    tr.addEventListener('click', go);
    tr.addEventListener('keydown', ev => { if (ev.key === 'Enter') { ev.preventDefault(); go(); } });
    return tr;
  }

  /** Updated in place on each status message (about once a second): rows keep their elements. */
  function renderDevices(st) {
    if (!DV.built) buildDevices();
    if (st) DV.last = st;
    if (!st) { DV.sub.textContent = 'waiting for the status…'; DV.table.hidden = true; DV.empty.hidden = true; return; }
    const devs = st.devices || [];
    const online = devs.filter(d => d.online).length;
    DV.sub.textContent = devs.length
      ? online + ' online · ' + devs.length + ' device' + (devs.length === 1 ? '' : 's') + ' · updated ' + BM.fmtTime(new Date().toISOString())
      : '';
    const url = onboardingURL(st);
    DV.table.hidden = !devs.length;
    DV.empty.hidden = !!devs.length;
    const helpKey = (devs.length ? 'n' : 'e') + (url || '');
    if (DV.helpKey !== helpKey) {
      DV.helpKey = helpKey;
      if (devs.length) {
        BM.append(clear(DV.foot), ['Click a device to see its traffic (the filter ', h('code', null, '~device NAME'), ') · add one with ',
          h('code', null, 'busymate devices add NAME [--address IP]'),
          url ? [' · onboarding page ', h('a', { href: url, target: '_blank', rel: 'noopener', class: 'mono' }, url)] : null]);
      } else {
        BM.append(clear(DV.empty), [h('div', { class: 'empty-title' }, 'No devices yet'), addHelp(url),
          h('p', { class: 'muted' }, 'A device is online while its traffic keeps arriving (devices.idle_seconds, 90 s by default); this view updates live.')]);
      }
    }
    const seen = new Set();
    let prev = null;
    for (const d of devs) {
      const key = d.name;
      if (seen.has(key)) continue;
      seen.add(key);
      let tr = DV.rows.get(key);
      if (!tr) { tr = createDeviceRow(d); DV.rows.set(key, tr); }
      fillDeviceRow(tr, d);
      const focused = DV.focus === key;
      tr.classList.toggle('focused', focused);
      if (focused && !DV.focusShown) { DV.focusShown = true; requestAnimationFrame(() => tr.scrollIntoView({ block: 'nearest' })); }
      const want = prev ? prev.nextSibling : DV.tbody.firstChild;
      if (want !== tr) DV.tbody.insertBefore(tr, want);
      prev = tr;
    }
    for (const [key, tr] of DV.rows) if (!seen.has(key)) { tr.remove(); DV.rows.delete(key); }
  }

  /** A deep link to a device: its row, marked, in the Devices view. */
  function focusDevice(name) {
    DV.focus = name;
    DV.focusShown = false;
    renderDevices(BM.app && BM.app.status ? BM.app.status() : DV.last || null);
  }

  BM.devicesView = { render: renderDevices, focus: focusDevice };

  BM.statusView = { render: renderStatus, readiness: st => { const a = assess(st); return { state: a.overall, headline: a.headline }; } };
})();
