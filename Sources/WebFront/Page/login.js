// Login page: show "wrong token" when the server answered the form with the page again.
'use strict';
(function () {
  const p = new URLSearchParams(location.search);
  if (p.has('token')) document.getElementById('login-error').hidden = false;
  // A deep link (#/exchange/ID, #/device/NAME) that led here: the form's submit drops the
  // fragment, so the page replays it from here once signed in.
  const keep = () => {
    if (/^#\/(exchange|device)\//.test(location.hash)) {
      try { sessionStorage.setItem('bm-deferred-route', location.hash); } catch (_) { /* storage off */ }
    }
  };
  keep();
  document.getElementById('login-form').addEventListener('submit', keep);
})();
