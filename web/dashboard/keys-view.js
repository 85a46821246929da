// The caller's API keys: list, create (shown once), revoke.
import { $, hooks, state } from './state.js';
import { announce } from './feedback.js';
import { api, busy } from './api.js';
import { cell, element, timeNode } from './dom.js';
import { revealSecret } from './secrets.js';

function isCurrentKey(key) {
  return typeof key.prefix === 'string' && typeof state.secret === 'string' && state.secret.startsWith(`${key.prefix}_`);
}

export function renderKeys(keys) {
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

export async function createKey(button) {
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
      hooks.signOut(`Key ${name} was revoked; you have been signed out.`);
      return;
    }
    announce(`Key ${name} was revoked.`);
    await loadKeys();
  });
}
