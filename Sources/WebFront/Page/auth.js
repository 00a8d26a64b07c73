// Signing out: the Sign out button, and back to the login page when the session has ended (a 401).

import { $ } from './dom.js';
import { api, onUnauthorized } from './api.js';
import { S } from './store.js';

$('#logout').addEventListener('click', async () => {
  try { await api('POST', '/api/logout', {}); } catch (_) { /* go anyway */ }
  location.href = '/login';
});
let redirecting = false;
onUnauthorized(() => {
  if (redirecting) return;
  redirecting = true;
  // Signed out while following a deep link: the login replays it.
  if (S.lastDeepLink) { try { sessionStorage.setItem('bm-deferred-route', S.lastDeepLink); } catch (_) { /* storage off */ } }
  location.href = '/login';
});
