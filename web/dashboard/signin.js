// Signing in with a key or the admin token, signing out, and which view shows.
import { $, CREDENTIAL_KEY, state } from './state.js';
import { ApiFailure } from './errors.js';
import { announce, clearError, showError } from './feedback.js';
import { api } from './api.js';
import { hideSecret } from './secrets.js';
import { renderQuota, startCountdown } from './quota-view.js';
import { renderKeys } from './keys-view.js';
import { loadSessions } from './sessions-view.js';
import { loadUsage } from './usage-view.js';
import { loadPlans, loadUsers } from './admin-view.js';
import { loadPlaygroundOptions } from './playground-options.js';
import { startOverview, stopOverview } from './overview-view.js';

export function remember(role, secret) {
  try {
    sessionStorage.setItem(CREDENTIAL_KEY, JSON.stringify({ role, secret }));
  } catch {
    announce('This browser refused sessionStorage: you stay signed in until the page is closed or reloaded.');
  }
}

export function forget() {
  try {
    sessionStorage.removeItem(CREDENTIAL_KEY);
  } catch {
    // Nothing stored then.
  }
}

/** Shows the sign-in form or the role's view ('admin' or 'user'), or the overview when it is the chosen page. */
export function showView(view) {
  state.view = view;
  const overview = view !== 'sign-in' && state.page === 'overview';
  $('sign-in').hidden = view !== 'sign-in';
  $('admin-view').hidden = view !== 'admin' || overview;
  $('user-view').hidden = view !== 'user' || overview;
  $('overview-view').hidden = !overview;
  $('identity').hidden = view === 'sign-in';
  $('views-nav').hidden = view === 'sign-in';
  $('nav-home').textContent = view === 'admin' ? 'Administration' : 'Account';
  for (const [id, page] of [
    ['nav-home', 'home'],
    ['nav-overview', 'overview'],
  ]) {
    if (state.page === page) $(id).setAttribute('aria-current', 'page');
    else $(id).removeAttribute('aria-current');
  }
  // The charts poll /metrics only while they are on screen.
  if (overview) startOverview();
  else stopOverview();
}

/** Switches between the role's page ('home') and the overview. */
export function showPage(page) {
  state.page = page;
  showView(state.view);
}

/** Checks a credential against the API and opens the matching view; false when it is refused. */
export async function signIn(role, secret) {
  state.role = role;
  state.secret = secret;
  try {
    if (role === 'admin') {
      await api('GET', '/api/admin/users?limit=100');
      state.userId = null;
      $('whoami').textContent = 'administrator';
      showView('admin');
      await Promise.all([loadUsers(), loadPlans()]);
    } else {
      // The key list first: it refuses the admin token (403), which quota/me would accept.
      const keys = await api('GET', '/api/keys');
      const quota = await api('GET', '/api/chat/quota/me');
      state.userId = quota.user_id;
      $('whoami').textContent = quota.user_id;
      showView('user');
      renderQuota(quota);
      renderKeys(keys.keys ?? []);
      startCountdown();
      await Promise.all([loadSessions(), loadPlaygroundOptions(), loadUsage()]);
      if (!$('playground-session').value) $('playground-session').value = `playground-${Date.now().toString(36)}`;
    }
    $('main').focus();
    return true;
  } catch (error) {
    state.role = null;
    state.secret = null;
    if (error instanceof ApiFailure && error.status === 403 && role === 'user') {
      // The admin token is a valid credential but owns no keys: point at the right choice.
      showError('That is not a user\'s API key. To sign in with the admin token, choose "The admin token".');
    } else if (error instanceof ApiFailure && (error.status === 401 || error.status === 403)) {
      showError(role === 'admin' ? 'That admin token was not accepted.' : 'That API key is not valid or has been revoked.');
    } else if (error instanceof ApiFailure && error.status === 404 && role === 'admin') {
      showError('The admin API is disabled on this server (COLLOQUY_ADMIN_TOKEN is not set).');
    } else {
      showError(error);
    }
    return false;
  }
}

export function signOut(message) {
  state.stream?.abort();
  state.role = null;
  state.secret = null;
  state.userId = null;
  state.reset = null;
  state.page = 'home';
  forget();
  hideSecret();
  for (const id of ['keys-body', 'sessions-body', 'users-body', 'playground-output', 'playground-sources', 'playground-thinking']) {
    $(id).replaceChildren();
  }
  $('lookup-result').hidden = true;
  $('lookup-result').replaceChildren();
  $('playground-meta').textContent = '';
  $('secret').value = '';
  showView('sign-in');
  if (message) showError(message);
  else {
    clearError();
    announce('Signed out.');
  }
  $('secret').focus();
}
