/**
 * Anthropic's Messages API, streamed: message_start, content_block_* (text_delta, thinking_delta),
 * message_delta (stop reason, output tokens), message_stop, and `error` events sent mid-stream.
 * Deep thinking turns on extended thinking with the model's token budget.
 */
import { createParser } from 'eventsource-parser';
import type { FinishReason } from '../domain/types.js';
import { malformedFrame, streamUpstream, truncatedStream, UpstreamFailure, type UpstreamTimeouts } from './upstream.js';
import { conversation, systemText } from './prompt.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';

/** The Messages API version this dialect speaks. */
export const ANTHROPIC_VERSION = '2023-06-01';
/** Anthropic requires max_tokens; this is the answer budget when the caller gives none. */
const DEFAULT_MAX_TOKENS = 4096;

interface StreamFrame {
  type?: string;
  message?: { usage?: { input_tokens?: number; output_tokens?: number } };
  delta?: { type?: string; text?: string; thinking?: string; stop_reason?: string | null };
  usage?: { input_tokens?: number; output_tokens?: number };
  error?: { type?: string; message?: string };
}

/** Maps Anthropic stop reasons onto the contract's three. */
export function anthropicFinish(reason: string | null | undefined): FinishReason {
  if (reason === 'max_tokens') return 'length';
  if (reason === 'refusal') return 'error';
  return 'stop';
}

/** The request body in Anthropic's dialect. */
export function anthropicBody(request: ProviderRequest): Record<string, unknown> {
  const answerTokens = request.maxTokens ?? DEFAULT_MAX_TOKENS;
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages: conversation(request).map((message) => ({ role: message.role, content: message.content })),
    stream: true,
    max_tokens: answerTokens,
  };
  const system = systemText(request);
  if (system) body.system = system;
  if (request.deepThinking) {
    // max_tokens covers thinking and answer; temperature must stay at its default with thinking on.
    body.thinking = { type: 'enabled', budget_tokens: request.model.thinkingBudget };
    body.max_tokens = request.model.thinkingBudget + answerTokens;
  } else if (request.temperature !== undefined) {
    // Anthropic's range is 0..1; the contract's is 0..2.
    body.temperature = Math.min(1, request.temperature);
  }
  return body;
}

/** Streams replies from Anthropic's Messages API. */
export class AnthropicProvider implements ChatProvider {
  readonly name = 'anthropic' as const;

  constructor(private readonly timeouts: UpstreamTimeouts) {}

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent> {
    const base = (request.model.baseUrl ?? 'https://api.anthropic.com').replace(/\/+$/, '');
    const url = /\/v1$/.test(base) ? `${base}/messages` : `${base}/v1/messages`;
    const headers: Record<string, string> = { accept: 'text/event-stream', 'anthropic-version': ANTHROPIC_VERSION };
    if (request.model.apiKey) headers['x-api-key'] = request.model.apiKey;

    const pending: ProviderEvent[] = [];
    let failure: UpstreamFailure | undefined;
    let finish: FinishReason | undefined;
    let stopped = false;
    let inputTokens = 0;
    let outputTokens = 0;

    const parser = createParser({
      onEvent: (message) => {
        if (failure || stopped) return;
        let frame: StreamFrame;
        try {
          frame = JSON.parse(message.data) as StreamFrame;
        } catch {
          failure = malformedFrame('anthropic');
          return;
        }
        const type = frame.type ?? message.event;
        switch (type) {
          case 'message_start':
            inputTokens = frame.message?.usage?.input_tokens ?? 0;
            outputTokens = frame.message?.usage?.output_tokens ?? 0;
            break;
          case 'content_block_delta':
            if (frame.delta?.type === 'text_delta' && frame.delta.text) pending.push({ type: 'delta', text: frame.delta.text });
            else if (frame.delta?.type === 'thinking_delta' && frame.delta.thinking) pending.push({ type: 'thinking', text: frame.delta.thinking });
            break;
          case 'message_delta':
            if (frame.delta?.stop_reason !== undefined) finish = anthropicFinish(frame.delta.stop_reason);
            if (frame.usage?.output_tokens !== undefined) outputTokens = frame.usage.output_tokens;
            if (frame.usage?.input_tokens !== undefined) inputTokens = frame.usage.input_tokens;
            break;
          case 'message_stop':
            stopped = true;
            break;
          case 'error': {
            const kind = frame.error?.type ?? 'error';
            const overloaded = kind === 'overloaded_error';
            failure = new UpstreamFailure(
              'upstream_error',
              overloaded ? 'The anthropic upstream is overloaded; try again shortly.' : 'The anthropic upstream reported an error in the middle of the reply.',
              `stream_${kind}`,
              false,
            );
            break;
          }
          default:
            // ping, content_block_start/stop and future event types carry nothing we need.
            break;
        }
      },
    });

    for await (const text of streamUpstream({ provider: 'anthropic', url, headers, body: anthropicBody(request) }, this.timeouts, signal)) {
      parser.feed(text);
      if (pending.length > 0) yield* pending.splice(0);
      if (failure) throw failure;
      if (stopped) break;
    }
    parser.reset({ consume: true });
    if (pending.length > 0) yield* pending.splice(0);
    if (failure) throw failure;
    if (!stopped) throw truncatedStream('anthropic');
    yield { type: 'usage', inputTokens, outputTokens };
    yield { type: 'finish', reason: finish ?? 'stop' };
  }
}
