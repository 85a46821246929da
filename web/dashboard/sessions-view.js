// The caller's chat sessions: list and clear.
import { $ } from './state.js';
import { announce } from './feedback.js';
import { api, busy } from './api.js';
import { cell, element, timeNode } from './dom.js';

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

export async function loadSessions() {
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
