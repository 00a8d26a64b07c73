// The Settings view's building blocks: a card, an editable list, the header-edits form, a save bar with its error.

import { h, clear } from './dom.js';
import { describeError } from './util.js';

export function sectionError(el, err) {
  clear(el);
  el.hidden = !err;
  if (err) el.textContent = describeError(err);
}

export function card(id, title, sub, ...body) {
  return h('section', { class: 'card', id },
    h('div', { class: 'card-head' }, h('span', { class: 'card-title' }, title), sub ? h('span', { class: 'muted small' }, sub) : null),
    ...body);
}

/** An editable list of strings: items with ×, plus an add box. onChange(newList). */
export function listEditor(title, items, placeholder, onChange, testName) {
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
export function headerEditor(side) {
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

export function saveBar(onSave, label) {
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
