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
