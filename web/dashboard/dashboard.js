// The caller's dashboard entry point: wires the views to the page and restores a remembered sign-in.
// Plain browser ES modules, no framework, no build step; the page's CSP forbids inline script and
// enforces Trusted Types, so nothing here ever turns a string into markup.
import { $, CREDENTIAL_KEY, hooks, state } from './state.js';
import { announce, clearError, showError } from './feedback.js';
import { busy } from './api.js';
import { formValue } from './dom.js';
import { copySecret, hideSecret } from './secrets.js';
import { forget, remember, showPage, showView, signIn, signOut } from './signin.js';
import { loadQuota } from './quota-view.js';
import { createKey } from './keys-view.js';
import { loadSessions } from './sessions-view.js';
import { loadUsage } from './usage-view.js';
import { sendMessage } from './playground-view.js';
import { bindPlaygroundOptions } from './playground-options.js';
import { bindAdminForms } from './admin-view.js';

function bindSignIn() {
  $('sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    clearError();
    const secret = $('secret').value.trim();
    if (!secret) {
      showError('Enter an API key or the admin token.');
      $('secret').focus();
      return;
    }
    const role = formValue(form, 'role') === 'admin' ? 'admin' : 'user';
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    announce('Signing in…');
    const ok = await signIn(role, secret);
    button.disabled = false;
    if (ok) {
      $('secret').value = '';
      if ($('remember').checked) remember(role, secret);
      announce(role === 'admin' ? 'Signed in as the administrator.' : `Signed in as ${state.userId}.`);
    } else {
      announce('');
      $('secret').focus();
    }
  });
  $('sign-out').addEventListener('click', () => signOut());
  $('nav-home').addEventListener('click', () => showPage('home'));
  $('nav-overview').addEventListener('click', () => showPage('overview'));
}

function bindUserView() {
  $('quota-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadQuota));
  $('key-create').addEventListener('click', (event) => createKey(event.currentTarget));
  $('sessions-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadSessions));
  $('usage-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadUsage));
  $('playground-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sendMessage();
  });
  $('playground-message').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      if (!$('playground-send').disabled) sendMessage();
    }
  });
  $('playground-stop').addEventListener('click', () => state.stream?.abort());
  bindPlaygroundOptions();
  $('playground-keep').addEventListener('change', (event) => {
    $('playground-session').disabled = !event.currentTarget.checked;
  });
}

function bindSecretPanel() {
  $('secret-copy').addEventListener('click', copySecret);
  $('secret-dismiss').addEventListener('click', () => {
    hideSecret();
    announce('The key is hidden now.');
    (state.role === 'admin' ? $('new-user-id') : $('key-create')).focus();
  });
}

async function restore() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(CREDENTIAL_KEY) ?? 'null');
  } catch {
    saved = null;
  }
  if (!saved || (saved.role !== 'user' && saved.role !== 'admin') || typeof saved.secret !== 'string') {
    showView('sign-in');
    return;
  }
  $('remember').checked = true;
  announce('Signing in…');
  if (await signIn(saved.role, saved.secret))
    announce(saved.role === 'admin' ? 'Signed in as the administrator.' : `Signed in as ${state.userId}.`);
  else {
    forget();
    showView('sign-in');
  }
}

hooks.signOut = signOut;
bindSignIn();
bindUserView();
bindAdminForms();
bindSecretPanel();
document.documentElement.classList.add('ready');
restore();
