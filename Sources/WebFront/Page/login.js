// Login page: show "wrong token" when the server answered the form with the page again.
'use strict';
(function () {
  const p = new URLSearchParams(location.search);
  if (p.has('token')) document.getElementById('login-error').hidden = false;
})();
