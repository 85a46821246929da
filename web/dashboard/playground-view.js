// The playground: POST /api/chat/stream with the chosen options, rendering deltas as they arrive.
import { $, hooks, state } from './state.js';
import { ApiFailure } from './errors.js';
import { announce, clearError, showError } from './feedback.js';
import { authHeaders, busy, parseResponse } from './api.js';
import { element, validForm } from './dom.js';
import { playgroundFields } from './playground-options.js';
import { applyStamp, loadQuota } from './quota-view.js';
import { loadUsage } from './usage-view.js';
import { loadSessions } from './sessions-view.js';
import { readSseStream } from './sse.js';

function renderSources(sources) {
  const list = $('playground-sources');
  list.replaceChildren(
    ...sources.map((source) => {
      const item = element('li', { attributes: { value: String(source.index ?? '') } });
      // Only http(s) links: a javascript: or data: URL from a document must never become clickable.
      if (source.url && /^https?:\/\//i.test(source.url)) {
        const link = element('a', {
          text: source.title || source.url,
          attributes: { href: source.url, rel: 'noopener noreferrer', target: '_blank' },
        });
        if (source.snippet) link.title = source.snippet;
        item.append(link);
      } else {
        item.append(element('span', { text: source.title || 'Untitled' }));
      }
      if (source.kind) item.append(element('span', { className: 'kind', text: source.kind === 'web' ? 'web' : 'document' }));
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

/** Reconnects (tried for about half a minute) when the connection drops in the middle of a reply. */
const RESUME_ATTEMPTS = 30;

/**
 * One resume attempt after a second's wait: the response to read on, false to try again, null when
 * the stream is gone (204: unknown or expired).
 */
async function resumeStream(streamId, lastId, signal) {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  if (signal.aborted) throw new DOMException('Stopped.', 'AbortError');
  try {
    const response = await fetch(`/api/chat/stream/${streamId}`, {
      headers: authHeaders({ accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) }),
      cache: 'no-store',
      credentials: 'omit',
      signal,
    });
    if (response.status === 204) return null;
    return response.ok ? response : false;
  } catch (error) {
    if (signal.aborted) throw error;
    return false;
  }
}

export async function sendMessage() {
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
  const request = { message, ...playgroundFields() };
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
  // The stream is resumable: a dropped connection is picked up again where it broke off.
  let streamId = null;
  let lastId = '';
  try {
    let response = await fetch('/api/chat/stream', {
      method: 'POST',
      headers: authHeaders({ 'content-type': 'application/json', accept: 'text/event-stream' }),
      body: JSON.stringify({ ...request, resumable: true }),
      cache: 'no-store',
      credentials: 'omit',
      signal: controller.signal,
    });
    if (!response.ok) await parseResponse(response);
    let model = '';
    let finished = false;
    const onEvent = ({ event, data, id }) => {
      if (id) lastId = id;
      const payload = JSON.parse(data);
      switch (event) {
        case 'start':
          streamId = payload.stream_id ?? null;
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
    };
    for (let attempt = 0; ; attempt += 1) {
      try {
        await readSseStream(response, onEvent);
      } catch (error) {
        if (controller.signal.aborted || !streamId) throw error;
      }
      if (finished || !streamId || attempt >= RESUME_ATTEMPTS) break;
      // The connection dropped mid-reply: resume after the last event seen, once a second.
      $('playground-meta').textContent = `Model ${model}: connection lost, resuming…`;
      const resumed = await resumeStream(streamId, lastId, controller.signal);
      if (resumed === null) break;
      if (resumed) response = resumed;
    }
    if (!finished) {
      $('playground-meta').textContent = 'The connection ended before the reply was complete.';
    } else if ($('alert').hidden) {
      // Sent and answered: ready for the next message.
      $('playground-message').value = '';
      announce('The reply is complete.');
    }
  } catch (error) {
    if (controller.signal.aborted) {
      // Stopped on purpose: the generation stops too (a resumable one would go on without us).
      if (streamId)
        void fetch(`/api/chat/stream/${streamId}/cancel`, { method: 'POST', headers: authHeaders({}), credentials: 'omit' }).catch(
          () => {},
        );
      $('playground-meta').textContent = 'Stopped.';
    } else if (error instanceof ApiFailure && error.status === 401) {
      hooks.signOut('Your key is no longer valid (revoked or unknown). Sign in with another key.');
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
    await busy(null, () => Promise.all([loadQuota(), loadSessions(), loadUsage()]));
  }
}
