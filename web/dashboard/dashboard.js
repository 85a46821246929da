// The caller's dashboard: sign in with an API key (or the admin token), then manage keys, watch
// quota, clear sessions and try the streaming chat. Plain browser JS, no framework, no build step.
// The page's CSP forbids inline script and enforces Trusted Types, so nothing here ever turns a
// string into markup: every node is built with createElement/textContent.
import { readSseStream } from './sse.js';

const CREDENTIAL_KEY = 'colloquy.dashboard.credential';
const SECOND = 1000;

/** @type {{role: 'user'|'admin'|null, secret: string|null, userId: string|null, reset: number|null, refreshingQuota: boolean, stream: AbortController|null}} */
const state = { role: null, secret: null, userId: null, reset: null, refreshingQuota: false, stream: null };

const $ = (id) => {
  const node = document.getElementById(id);
  if (!node) throw new Error(`missing element #${id}`);
  return node;
};

/** An API error as the contract sends it, kept with its HTTP status. */
class ApiFailure extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

// ---------------------------------------------------------------------------------------------
// Feedback: one polite status line and one alert region.

function announce(message) {
  $('status').textContent = message;
}

function showError(error) {
  const alert = $('alert');
  let message = error instanceof Error ? error.message : String(error);
  if (error instanceof ApiFailure && Array.isArray(error.details) && error.details.length > 0) {
    message += ' ' + error.details.map((detail) => `${detail.path}: ${detail.message}`).join('; ');
  }
  alert.textContent = message;
  alert.hidden = false;
}

function clearError() {
  const alert = $('alert');
  alert.hidden = true;
  alert.textContent = '';
}

// ---------------------------------------------------------------------------------------------
// HTTP.

function authHeaders(extra = {}) {
  return { authorization: `Bearer ${state.secret}`, ...extra };
}

/** Calls the API with the signed-in credential; resolves with the JSON body or throws ApiFailure. */
async function api(method, path, body) {
  const init = {
    method,
    headers: authHeaders(body === undefined ? {} : { 'content-type': 'application/json' }),
    cache: 'no-store',
    // The credential travels only in Authorization: never send or accept cookies.
    credentials: 'omit',
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  return parseResponse(response);
}

async function parseResponse(response) {
  const text = await response.text();
  let payload = null;
  try {
    payload = text ? JSON.parse(text) : null;
  } catch {
    payload = null;
  }
  if (!response.ok) {
    const error = payload && payload.error ? payload.error : {};
    throw new ApiFailure(
      response.status,
      error.code || `http_${response.status}`,
      error.message || `The server answered ${response.status}.`,
      error.details,
    );
  }
  return payload;
}

/** Runs an action with its button disabled and errors shown; returns the action's result. */
async function busy(button, action) {
  clearError();
  // A new user action replaces the last outcome; background refreshes leave it standing.
  if (button) {
    announce('');
    button.disabled = true;
  }
  try {
    return await action();
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 401 && state.role === 'user') {
      signOut('Your key is no longer valid (revoked or unknown). Sign in with another key.');
      return undefined;
    }
    showError(error);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Small DOM helpers.

function element(tag, options = {}, children = []) {
  const node = document.createElement(tag);
  if (options.className) node.className = options.className;
  if (options.text !== undefined) node.textContent = options.text;
  if (options.attributes) for (const [name, value] of Object.entries(options.attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** A <time> for an ISO string, or a dash when there is none. */
function timeNode(iso, fallback = '—') {
  if (!iso) return document.createTextNode(fallback);
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return document.createTextNode(String(iso));
  return element('time', { text: date.toLocaleString(), attributes: { datetime: date.toISOString() } });
}

/** A table cell that carries its column name for the stacked phone layout. */
function cell(label, content) {
  const td = element('td', { attributes: { 'data-label': label } });
  td.append(content instanceof Node ? content : document.createTextNode(String(content)));
  return td;
}

function formatDuration(ms) {
  const total = Math.max(0, Math.ceil(ms / SECOND));
  const days = Math.floor(total / 86_400);
  const hours = Math.floor((total % 86_400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const parts = [];
  if (days) parts.push(`${days} d`);
  if (days || hours) parts.push(`${hours} h`);
  if (days || hours || minutes) parts.push(`${minutes} min`);
  parts.push(`${seconds} s`);
  return parts.join(' ');
}

function formValue(form, name) {
  const field = form.elements.namedItem(name);
  return field && 'value' in field ? field.value.trim() : '';
}

/** Checks the form's required fields and patterns, focusing the first bad one. */
function validForm(form) {
  for (const field of form.elements) {
    if (!('checkValidity' in field) || field.disabled) continue;
    if ('value' in field && typeof field.value === 'string' && field.required && field.value.trim() === '') field.value = '';
    if (!field.checkValidity()) {
      const label = field.labels && field.labels[0] ? field.labels[0].textContent.trim() : field.name;
      showError(`${label}: ${field.validationMessage}`);
      field.setAttribute('aria-invalid', 'true');
      field.focus();
      return false;
    }
    field.removeAttribute('aria-invalid');
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Secrets shown once.

function revealSecret(key, owner) {
  const panel = $('secret-panel');
  $('secret-value').value = key;
  $('secret-owner').textContent = owner;
  $('secret-copy').textContent = 'Copy';
  panel.hidden = false;
  panel.focus();
  $('secret-value').select();
}

function hideSecret() {
  $('secret-value').value = '';
  $('secret-panel').hidden = true;
}

async function copySecret() {
  const input = $('secret-value');
  try {
    await navigator.clipboard.writeText(input.value);
    $('secret-copy').textContent = 'Copied';
    announce('The key was copied to the clipboard.');
  } catch {
    // Without clipboard permission, leave it selected so Ctrl+C works.
    input.focus();
    input.select();
    announce('Copying is blocked here: the key is selected, press Ctrl+C to copy it.');
  }
}

// ---------------------------------------------------------------------------------------------
// Sign-in and views.

function remember(role, secret) {
  try {
    sessionStorage.setItem(CREDENTIAL_KEY, JSON.stringify({ role, secret }));
  } catch {
    announce('This browser refused sessionStorage: you stay signed in until the page is closed or reloaded.');
  }
}

function forget() {
  try {
    sessionStorage.removeItem(CREDENTIAL_KEY);
  } catch {
    // Nothing stored then.
  }
}

function showView(view) {
  $('sign-in').hidden = view !== 'sign-in';
  $('admin-view').hidden = view !== 'admin';
  $('user-view').hidden = view !== 'user';
  $('identity').hidden = view === 'sign-in';
}

/** Checks a credential against the API and opens the matching view; false when it is refused. */
async function signIn(role, secret) {
  state.role = role;
  state.secret = secret;
  try {
    if (role === 'admin') {
      await api('GET', '/api/admin/users?limit=100');
      state.userId = null;
      $('whoami').textContent = 'administrator';
      showView('admin');
      await loadUsers();
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
      await loadSessions();
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

function signOut(message) {
  state.stream?.abort();
  state.role = null;
  state.secret = null;
  state.userId = null;
  state.reset = null;
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

// ---------------------------------------------------------------------------------------------
// Quota.

function renderQuota(quota) {
  const limit = Number(quota.limit) || 0;
  const used = Math.max(0, Number(quota.used) || 0);
  const remaining = Number(quota.remaining) || 0;
  $('quota-plan').textContent = quota.plan;
  $('quota-used').textContent = String(used);
  $('quota-limit').textContent = String(limit);
  $('quota-remaining').textContent = String(remaining);
  const bar = $('quota-bar');
  bar.max = Math.max(limit, 1);
  bar.value = Math.min(used, bar.max);
  bar.textContent = `${used} of ${limit}`;
  bar.setAttribute('aria-valuetext', `${used} of ${limit} used, ${remaining} remaining`);
  bar.classList.toggle('low', limit > 0 && remaining / limit <= 0.1);
  const reset = $('quota-reset');
  reset.replaceChildren();
  const resetAt = Date.parse(quota.reset);
  state.reset = Number.isNaN(resetAt) ? null : resetAt;
  if (state.reset !== null) {
    reset.setAttribute('datetime', new Date(state.reset).toISOString());
    reset.textContent = new Date(state.reset).toLocaleString();
  }
  tickCountdown();
}

/** Applies the quota carried by a stream's start event, before the reply is even written. */
function applyStamp(stamp) {
  const limit = Number($('quota-limit').textContent);
  if (!Number.isFinite(limit) || typeof stamp.remaining !== 'number') return;
  renderQuota({ plan: stamp.plan ?? $('quota-plan').textContent, limit, used: limit - stamp.remaining, remaining: stamp.remaining, reset: stamp.reset });
}

async function loadQuota() {
  const quota = await api('GET', '/api/chat/quota/me');
  renderQuota(quota);
}

function tickCountdown() {
  if (state.reset === null) {
    $('quota-countdown').textContent = '—';
    return;
  }
  const left = state.reset - Date.now();
  $('quota-countdown').textContent = formatDuration(left);
  // The window rolled over: fetch the fresh record once.
  if (left <= 0 && !state.refreshingQuota && state.role === 'user') {
    state.refreshingQuota = true;
    busy(null, loadQuota).finally(() => {
      state.refreshingQuota = false;
    });
  }
}

let countdownTimer = null;
function startCountdown() {
  if (countdownTimer === null) countdownTimer = setInterval(tickCountdown, SECOND);
}

// ---------------------------------------------------------------------------------------------
// Keys.

function isCurrentKey(key) {
  return typeof key.prefix === 'string' && typeof state.secret === 'string' && state.secret.startsWith(`${key.prefix}_`);
}

function renderKeys(keys) {
  const body = $('keys-body');
  const rows = keys.map((key) => {
    const label = element('span', {}, [element('code', { text: `${key.prefix ?? key.key_id}…` })]);
    if (isCurrentKey(key)) label.append(' ', element('span', { className: 'tag', text: 'this key' }));
    if (key.name) label.append(' ', element('span', { className: 'hint', text: key.name }));
    const actions = element('td', { className: 'actions', attributes: { 'data-label': 'Actions' } });
    if (key.revoked) {
      actions.append(element('span', { className: 'tag muted', text: 'revoked' }));
    } else {
      const revoke = element('button', {
        className: 'danger small',
        text: 'Revoke',
        attributes: { type: 'button', 'aria-label': `Revoke key ${key.prefix ?? key.key_id}` },
      });
      revoke.addEventListener('click', () => revokeKey(key, revoke));
      actions.append(revoke);
    }
    const row = element('tr', { attributes: { 'data-key-id': key.key_id } });
    row.append(cell('Key', label), cell('Created', timeNode(key.created)), cell('Last used', timeNode(key.last_used, 'never')), actions);
    if (key.revoked) row.classList.add('revoked');
    return row;
  });
  body.replaceChildren(...rows);
  $('keys-empty').hidden = rows.length > 0;
}

async function loadKeys() {
  const payload = await api('GET', '/api/keys');
  renderKeys(payload.keys ?? []);
}

async function createKey(button) {
  await busy(button, async () => {
    const created = await api('POST', '/api/keys', {});
    revealSecret(created.key, `A new key for ${state.userId}.`);
    announce('A new key was created. Copy it now: it will not be shown again.');
    await loadKeys();
  });
}

async function revokeKey(key, button) {
  const name = key.prefix ?? key.key_id;
  const current = isCurrentKey(key);
  const question = current
    ? `Revoke ${name}? It is the key you are signed in with: you will be signed out.`
    : `Revoke ${name}? Programs using it will get 401 from now on.`;
  if (!window.confirm(question)) return;
  await busy(button, async () => {
    await api('DELETE', `/api/keys/${encodeURIComponent(key.key_id)}`);
    if (current) {
      signOut(`Key ${name} was revoked; you have been signed out.`);
      return;
    }
    announce(`Key ${name} was revoked.`);
    await loadKeys();
  });
}

// ---------------------------------------------------------------------------------------------
// Sessions.

function renderSessions(sessions) {
  const rows = sessions.map((session) => {
    const actions = element('td', { className: 'actions', attributes: { 'data-label': 'Actions' } });
    const resume = element('button', {
      className: 'secondary small',
      text: 'Continue',
      attributes: { type: 'button', 'aria-label': `Continue session ${session.session_id} in the playground` },
    });
    resume.addEventListener('click', () => {
      $('playground-session').value = session.session_id;
      $('playground-keep').checked = true;
      $('playground-message').focus();
    });
    const clear = element('button', {
      className: 'danger small',
      text: 'Clear',
      attributes: { type: 'button', 'aria-label': `Clear session ${session.session_id}` },
    });
    clear.addEventListener('click', () => clearSession(session.session_id, clear));
    actions.append(resume, ' ', clear);
    const row = element('tr', { attributes: { 'data-session-id': session.session_id } });
    row.append(
      cell('Session', element('code', { text: session.session_id })),
      cell('Messages', String(session.message_count ?? 0)),
      cell('Updated', timeNode(session.updated)),
      actions,
    );
    return row;
  });
  $('sessions-body').replaceChildren(...rows);
  $('sessions-empty').hidden = rows.length > 0;
}

async function loadSessions() {
  const payload = await api('GET', '/api/chat/sessions');
  renderSessions(payload.sessions ?? []);
}

async function clearSession(sessionId, button) {
  if (!window.confirm(`Clear session ${sessionId}? Its messages are deleted for good.`)) return;
  await busy(button, async () => {
    await api('DELETE', `/api/chat/session/${encodeURIComponent(sessionId)}`);
    announce(`Session ${sessionId} was cleared.`);
    await loadSessions();
  });
}

// ---------------------------------------------------------------------------------------------
// Playground: POST /api/chat/stream, rendering deltas as they arrive.

function renderSources(sources) {
  const list = $('playground-sources');
  list.replaceChildren(
    ...sources.map((source) => {
      const item = element('li', { attributes: { value: String(source.index ?? '') } });
      if (source.url && /^https?:\/\//i.test(source.url)) {
        item.append(element('a', { text: source.title || source.url, attributes: { href: source.url, rel: 'noopener noreferrer', target: '_blank' } }));
      } else {
        item.append(element('span', { text: source.title || 'Untitled' }));
      }
      return item;
    }),
  );
  list.hidden = sources.length === 0;
}

function setStreaming(on) {
  $('playground-send').disabled = on;
  $('playground-stop').disabled = !on;
  $('playground-output').setAttribute('aria-busy', on ? 'true' : 'false');
}

async function sendMessage() {
  const form = $('playground-form');
  const message = $('playground-message').value.trim();
  const keep = $('playground-keep').checked;
  const sessionField = $('playground-session');
  sessionField.required = keep;
  if (!validForm(form)) return;
  if (!message) {
    showError('Write a message first.');
    $('playground-message').focus();
    return;
  }
  clearError();
  const request = { message };
  if (keep) request.session_id = sessionField.value.trim();

  const output = $('playground-output');
  const thinking = $('playground-thinking');
  output.replaceChildren();
  thinking.replaceChildren();
  $('playground-thinking-box').hidden = true;
  renderSources([]);
  $('playground-meta').textContent = 'Waiting for the reply…';
  const controller = new AbortController();
  state.stream = controller;
  setStreaming(true);
  try {
    const response = await fetch('/api/chat/stream', {
      method: 'POST',
      headers: authHeaders({ 'content-type': 'application/json', accept: 'text/event-stream' }),
      body: JSON.stringify(request),
      cache: 'no-store',
      credentials: 'omit',
      signal: controller.signal,
    });
    if (!response.ok) await parseResponse(response);
    let model = '';
    let finished = false;
    await readSseStream(response, ({ event, data }) => {
      const payload = JSON.parse(data);
      switch (event) {
        case 'start':
          model = payload.model ?? '';
          $('playground-meta').textContent = `Model ${model}: writing…`;
          applyStamp(payload);
          break;
        case 'sources':
          renderSources(payload.sources ?? []);
          break;
        case 'thinking':
          $('playground-thinking-box').hidden = false;
          thinking.append(payload.text ?? '');
          break;
        case 'delta':
          output.append(payload.text ?? '');
          break;
        case 'done': {
          finished = true;
          const usage = payload.usage ? `, ${payload.usage.input_tokens} tokens in, ${payload.usage.output_tokens} out` : '';
          $('playground-meta').textContent = `Model ${model}: ${payload.finish_reason ?? 'done'}${usage}.`;
          break;
        }
        case 'error':
          finished = true;
          showError(payload.error?.message ?? 'The reply failed.');
          $('playground-meta').textContent = `Stopped: ${payload.error?.code ?? 'error'}.`;
          break;
        default:
          break;
      }
    });
    if (!finished) {
      $('playground-meta').textContent = 'The connection ended before the reply was complete.';
    } else if ($('alert').hidden) {
      // Sent and answered: ready for the next message.
      $('playground-message').value = '';
      announce('The reply is complete.');
    }
  } catch (error) {
    if (controller.signal.aborted) {
      $('playground-meta').textContent = 'Stopped.';
    } else if (error instanceof ApiFailure && error.status === 401) {
      signOut('Your key is no longer valid (revoked or unknown). Sign in with another key.');
      return;
    } else {
      $('playground-meta').textContent = '';
      showError(error);
    }
  } finally {
    if (state.stream === controller) state.stream = null;
    setStreaming(false);
  }
  if (state.role === 'user') {
    await busy(null, () => Promise.all([loadQuota(), loadSessions()]));
  }
}

// ---------------------------------------------------------------------------------------------
// Administration.

function renderUsers(users) {
  const rows = users.map((user) => {
    const row = element('tr', { attributes: { 'data-user-id': user.user_id } });
    const actions = element('td', { className: 'actions', attributes: { 'data-label': 'Actions' } });
    const pick = element('button', {
      className: 'secondary small',
      text: 'Select',
      attributes: { type: 'button', 'aria-label': `Fill the forms with ${user.user_id}` },
    });
    pick.addEventListener('click', () => {
      for (const id of ['plan-user-id', 'key-user-id', 'lookup-user-id']) $(id).value = user.user_id;
      $('plan-name').focus();
    });
    actions.append(pick);
    row.append(cell('User', element('code', { text: user.user_id })), cell('Plan', user.plan), cell('Created', timeNode(user.created)), actions);
    return row;
  });
  $('users-body').replaceChildren(...rows);
  $('users-empty').hidden = rows.length > 0;
}

async function loadUsers() {
  const payload = await api('GET', '/api/admin/users?limit=100');
  renderUsers(payload.users ?? []);
}

async function issueKey(userId) {
  const created = await api('POST', `/api/admin/users/${encodeURIComponent(userId)}/keys`, {});
  revealSecret(created.key, `The key for ${userId}. Give it to them; they sign in to this page with it.`);
}

function bindAdminForms() {
  $('create-user-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    const plan = formValue(form, 'plan');
    await busy(form.querySelector('button[type=submit]'), async () => {
      await api('POST', '/api/admin/users', { user_id: userId, plan });
      if ($('new-user-key').checked) {
        await issueKey(userId);
        announce(`User ${userId} was created on plan ${plan} with a first key.`);
      } else {
        announce(`User ${userId} was created on plan ${plan}.`);
      }
      form.reset();
      await loadUsers();
    });
  });

  $('set-plan-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    const plan = formValue(form, 'plan');
    await busy(form.querySelector('button[type=submit]'), async () => {
      const updated = await api('PATCH', `/api/admin/users/${encodeURIComponent(userId)}`, { plan });
      announce(`User ${updated?.user_id ?? userId} is now on plan ${updated?.plan ?? plan}.`);
      await loadUsers();
    });
  });

  $('issue-key-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    await busy(form.querySelector('button[type=submit]'), async () => {
      await issueKey(userId);
      announce(`A new key was issued for ${userId}.`);
    });
  });

  $('lookup-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!validForm(form)) return;
    const userId = formValue(form, 'user_id');
    await busy(form.querySelector('button[type=submit]'), async () => {
      const quota = await api('GET', `/api/chat/quota/${encodeURIComponent(userId)}`);
      const result = $('lookup-result');
      const facts = [
        ['User', quota.user_id],
        ['Plan', quota.plan],
        ['Used', `${quota.used} of ${quota.limit}`],
        ['Remaining', String(quota.remaining)],
      ];
      result.replaceChildren(...facts.map(([term, value]) => element('div', {}, [element('dt', { text: term }), element('dd', { text: value })])));
      result.append(element('div', {}, [element('dt', { text: 'Resets' }), element('dd', {}, [timeNode(quota.reset)])]));
      result.hidden = false;
    });
  });

  $('users-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadUsers));
}

// ---------------------------------------------------------------------------------------------
// Wiring.

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
}

function bindUserView() {
  $('quota-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadQuota));
  $('key-create').addEventListener('click', (event) => createKey(event.currentTarget));
  $('sessions-refresh').addEventListener('click', (event) => busy(event.currentTarget, loadSessions));
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
  if (await signIn(saved.role, saved.secret)) announce(saved.role === 'admin' ? 'Signed in as the administrator.' : `Signed in as ${state.userId}.`);
  else {
    forget();
    showView('sign-in');
  }
}

bindSignIn();
bindUserView();
bindAdminForms();
bindSecretPanel();
document.documentElement.classList.add('ready');
restore();
