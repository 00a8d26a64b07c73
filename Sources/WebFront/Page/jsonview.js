// JSON tree viewer with its own parser. JSON.parse is not used on captured bodies: it
// reorders integer-like keys ("10" before "zeta") and rounds big numbers
// (12345678901234567890 -> 12345678901234567000). This parser keeps keys in the order
// written and numbers as their original text ("1.0", "1e5" stay as written).

import { h } from './dom.js';

export class JSONSyntaxError extends Error {
  constructor(msg, pos) { super(msg + ' at offset ' + pos); this.pos = pos; }
}

const NUM = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const MAX_DEPTH = 2000;

/** Parse to nodes: {t:'o', e:[[key, node], ...]} | {t:'a', e:[node...]} | {t:'s', v} | {t:'n', v:raw text} | {t:'b', v} | {t:'z'} */
export function parse(text) {
  let i = 0;
  const n = text.length;
  if (n && text.charCodeAt(0) === 0xFEFF) i = 1;

  function ws() {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 10 || c === 13 || c === 9) i++;
      else return;
    }
  }

  function str() {
    // text[i] === '"'
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= n) throw new JSONSyntaxError('unterminated string', i);
      const c = text.charCodeAt(i);
      if (c === 34) { out += text.slice(start, i); i++; return out; }
      if (c < 32) throw new JSONSyntaxError('control character in string', i);
      if (c === 92) {
        out += text.slice(start, i);
        const e = text[i + 1];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            const hex = text.slice(i + 2, i + 6);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw new JSONSyntaxError('bad \\u escape', i);
            out += String.fromCharCode(parseInt(hex, 16));
            i += 4;
            break;
          }
          default: throw new JSONSyntaxError('bad escape', i);
        }
        i += 2;
        start = i;
        continue;
      }
      i++;
    }
  }

  function value(depth) {
    if (depth > MAX_DEPTH) throw new JSONSyntaxError('nested too deep', i);
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const e = [];
      ws();
      if (text[i] === '}') { i++; return { t: 'o', e }; }
      for (;;) {
        ws();
        if (text[i] !== '"') throw new JSONSyntaxError('expected a key', i);
        const k = str();
        ws();
        if (text[i] !== ':') throw new JSONSyntaxError("expected ':'", i);
        i++;
        e.push([k, value(depth + 1)]);
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return { t: 'o', e }; }
        throw new JSONSyntaxError("expected ',' or '}'", i);
      }
    }
    if (c === '[') {
      i++;
      const e = [];
      ws();
      if (text[i] === ']') { i++; return { t: 'a', e }; }
      for (;;) {
        e.push(value(depth + 1));
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return { t: 'a', e }; }
        throw new JSONSyntaxError("expected ',' or ']'", i);
      }
    }
    if (c === '"') return { t: 's', v: str() };
    if (c === 't' && text.startsWith('true', i)) { i += 4; return { t: 'b', v: 'true' }; }
    if (c === 'f' && text.startsWith('false', i)) { i += 5; return { t: 'b', v: 'false' }; }
    if (c === 'n' && text.startsWith('null', i)) { i += 4; return { t: 'z' }; }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (m && m[0].length) { i += m[0].length; return { t: 'n', v: m[0] }; }
    throw new JSONSyntaxError(i >= n ? 'unexpected end' : 'unexpected character', i);
  }

  const v = value(0);
  ws();
  if (i < n) throw new JSONSyntaxError('trailing characters', i);
  return v;
}

// ---------------------------------------------------------------- rendering
const CHUNK = 200;          // children rendered at a time; "… N more" renders the next chunk
const AUTO_EXPAND_DEPTH = 6;

function scalar(node) {
  switch (node.t) {
    case 's': return h('span', { class: 'jv-str' }, JSON.stringify(node.v));
    case 'n': return h('span', { class: 'jv-num' }, node.v);
    case 'b': return h('span', { class: 'jv-lit' }, node.v);
    default: return h('span', { class: 'jv-null' }, 'null');
  }
}

function summary(node) {
  const n = node.e.length;
  if (node.t === 'o') return ' ' + n + (n === 1 ? ' key' : ' keys') + ' }';
  return ' ' + n + (n === 1 ? ' item' : ' items') + ' ]';
}

/** One line for key/index + value; containers get a folding toggle. */
function renderNode(key, isIndex, node, last, depth, budget) {
  const comma = last ? null : h('span', { class: 'jpunct' }, ',');
  const keyEl = key === null ? null
    : isIndex ? h('span', { class: 'json-idx' }, String(key) + ': ')
      : [h('span', { class: 'json-key' }, JSON.stringify(key)), h('span', { class: 'jpunct' }, ': ')];
  if (node.t !== 'o' && node.t !== 'a') {
    return h('div', { class: 'jn leaf' }, h('div', { class: 'jline' }, keyEl, scalar(node), comma));
  }
  const open = node.t === 'o' ? '{' : '[';
  const close = node.t === 'o' ? '}' : ']';
  if (!node.e.length) {
    return h('div', { class: 'jn leaf' }, h('div', { class: 'jline' }, keyEl, h('span', { class: 'jpunct' }, open + close), comma));
  }
  const toggle = h('span', { class: 'json-toggle', 'aria-hidden': 'true' }, '▼');
  const sum = h('span', { class: 'jsum' }, summary(node), comma ? ',' : '');
  const line = h('div', { class: 'jline' }, toggle, keyEl, h('span', { class: 'jpunct' }, open), sum);
  const children = h('div', { class: 'jc' });
  const closeEl = h('div', { class: 'jclose' }, h('span', { class: 'jpunct' }, close), comma);
  const el = h('div', { class: 'jn' }, line, children, closeEl);
  el._node = node;
  el._depth = depth;
  el._rendered = 0;
  const expand = depth < AUTO_EXPAND_DEPTH && budget.n > 0;
  if (expand) renderChildren(el, budget);
  else el.classList.add('folded');
  return el;
}

function renderChildren(el, budget) {
  const node = el._node;
  const children = el.querySelector(':scope > .jc');
  const more = children.querySelector(':scope > .jmore');
  if (more) more.remove();
  const from = el._rendered;
  const to = Math.min(node.e.length, from + CHUNK);
  const frag = document.createDocumentFragment();
  for (let k = from; k < to; k++) {
    budget.n--;
    const last = k === node.e.length - 1;
    if (node.t === 'o') frag.appendChild(renderNode(node.e[k][0], false, node.e[k][1], last, el._depth + 1, budget));
    else frag.appendChild(renderNode(k, true, node.e[k], last, el._depth + 1, budget));
  }
  el._rendered = to;
  if (to < node.e.length) {
    frag.appendChild(h('div', { class: 'jmore', role: 'button', tabindex: '0' }, '… ' + (node.e.length - to).toLocaleString('en-US') + ' more'));
  }
  children.appendChild(frag);
}

function onClick(ev) {
  const t = ev.target;
  if (t.classList.contains('jmore')) {
    renderChildren(t.closest('.jn'), { n: 1e9 });
    return;
  }
  if (!(t.classList.contains('json-key') || t.classList.contains('json-toggle') || t.classList.contains('jsum') || t.classList.contains('json-idx'))) return;
  const jn = t.closest('.jn');
  if (!jn || jn.classList.contains('leaf')) return;
  const folding = !jn.classList.contains('folded');
  if (!folding && jn._rendered === 0) renderChildren(jn, { n: 400 });
  jn.classList.toggle('folded', folding);
  if (ev.altKey && !folding) {
    // Alt-click: expand the whole subtree (rendered lazily, capped).
    for (const sub of jn.querySelectorAll('.jn.folded')) {
      if (sub._rendered === 0) renderChildren(sub, { n: 400 });
      sub.classList.remove('folded');
    }
  }
}

/** Tree element for text, or null when it is not valid JSON. */
export function renderJSONTree(text) {
  let root;
  try { root = parse(text); } catch (e) { return null; }
  const tree = h('div', { class: 'json-tree' });
  tree.appendChild(renderNode(null, false, root, true, 0, { n: 1000 }));
  tree.addEventListener('click', onClick);
  return tree;
}
