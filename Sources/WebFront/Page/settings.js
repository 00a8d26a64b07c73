// The Settings view: loads the settings from the API and lays out its cards (each saves its own part).
// Rules are read generically: name, enabled, match and action are shown; every other key of a rule is passed back unchanged.

import { h, $, clear } from './dom.js';
import { settingsProblem } from './util.js';
import { api } from './api.js';
import { rulesSection } from './settingsrules.js';
import { sslSection, upstreamSection, breakpointsSection, pinnedSection, rawSection } from './settingscards.js';

const root = $('#view-settings');
let settings = null;
let loading = false;

export async function load() {
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

/** A file that does not parse: what is shown instead, and why a save is refused until it is fixed. */
function inForceNotice() {
  if (settings.valid !== false) return null;
  const shown = settings.in_force === 'last_good'
    ? 'Shown below: the last good settings, the ones in force.'
    : 'No good version was read since the web front started; shown below: the defaults.';
  return h('div', { class: 'notice error settings-invalid', 'data-test': 'settings-in-force' },
    h('b', null, settingsProblem(settings.error)), ' ', shown, ' Saving here is refused until the file is fixed (busymate status says the same).');
}

function render() {
  clear(root);
  const page = h('div', { class: 'page' },
    h('div', { class: 'page-title' }, 'Settings',
      h('button', { type: 'button', class: 'btn small', onclick: load, title: 'Reload from the server' }, '↻ Reload')),
    inForceNotice(),
    h('div', { class: 'cards' }, sslSection(settings), upstreamSection(settings), rulesSection(settings), breakpointsSection(settings),
      pinnedSection(settings), rawSection(settings)));
  root.appendChild(page);
}
