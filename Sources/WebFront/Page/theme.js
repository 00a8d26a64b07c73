// The theme button: auto, light or dark, kept in localStorage.

import { $ } from './dom.js';

const THEMES = ['auto', 'light', 'dark'];
export function setTheme(t) {
  if (t === 'auto') document.documentElement.removeAttribute('data-theme');
  else document.documentElement.setAttribute('data-theme', t);
  $('#theme-toggle').title = 'Theme: ' + t + ' (click to change)';
  localStorage.setItem('bm-theme', t);
}
$('#theme-toggle').addEventListener('click', () => {
  const cur = localStorage.getItem('bm-theme') || 'auto';
  setTheme(THEMES[(THEMES.indexOf(cur) + 1) % THEMES.length]);
});
