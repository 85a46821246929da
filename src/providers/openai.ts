/**
 * Any OpenAI-compatible `/v1/chat/completions` server, streamed as SSE with `include_usage`.
 * Reasoning arrives as `reasoning_content` (DeepSeek, vLLM), `reasoning` (OpenRouter, Ollama's
 * compatibility layer) or `<think>` tags inside `content`; all become thinking events.
 */
import { createParser } from 'eventsource-parser';
import type { FinishReason } from '../domain/types.js';
import { malformedFrame, streamUpstream, truncatedStream, UpstreamFailure, type UpstreamTimeouts } from './upstream.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';

interface CompletionChunk {
  choices?: Array<{
    delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null };
    finish_reason?: string | null;
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: unknown;
}

/** Maps OpenAI finish reasons onto the contract's three. */
export function openAiFinish(reason: string): FinishReason {
  if (reason === 'length') return 'length';
  if (reason === 'content_filter') return 'error';
  return 'stop';
}

/** The request body in OpenAI's dialect. */
export function openAiBody(request: ProviderRequest): Record<string, unknown> {
  const system = systemText(request);
  const messages = [...(system ? [{ role: 'system', content: system }] : []), ...conversation(request)];
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  };
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens;
  if (request.deepThinking) body.reasoning_effort = 'high';
  return body;
}

/** Streams replies from any OpenAI-compatible chat completions endpoint. */
export class OpenAiProvider implements ChatProvider {
  readonly name = 'openai' as const;

  constructor(private readonly timeouts: UpstreamTimeouts) {}

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent> {
    const base = (request.model.baseUrl ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (request.model.apiKey) headers.authorization = `Bearer ${request.model.apiKey}`;

    const pending: ProviderEvent[] = [];
    const splitter = new ThinkTagSplitter();
    let failure: UpstreamFailure | undefined;
    let finish: FinishReason | undefined;
    let done = false;

    const parser = createParser({
      onEvent: (message) => {
        if (failure || done) return;
        if (message.data === '[DONE]') {
          done = true;
          return;
        }
        let chunk: CompletionChunk;
        try {
          chunk = JSON.parse(message.data) as CompletionChunk;
        } catch {
          failure = malformedFrame('openai');
          return;
        }
        if (chunk.error !== undefined || message.event === 'error') {
          failure = new UpstreamFailure('upstream_error', 'The openai upstream reported an error in the middle of the reply.', 'stream_error', false);
          return;
        }
        const choice = chunk.choices?.[0];
        const delta = choice?.delta;
        const reasoning = delta?.reasoning_content ?? delta?.reasoning;
        if (typeof reasoning === 'string' && reasoning.length > 0) pending.push({ type: 'thinking', text: reasoning });
        if (typeof delta?.content === 'string' && delta.content.length > 0) {
          for (const piece of splitter.push(delta.content)) pending.push(piece);
        }
        if (choice?.finish_reason) finish = openAiFinish(choice.finish_reason);
        if (chunk.usage) {
          pending.push({ type: 'usage', inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 });
        }
      },
    });

    for await (const text of streamUpstream({ provider: 'openai', url: `${base}/chat/completions`, headers, body: openAiBody(request) }, this.timeouts, signal)) {
      parser.feed(text);
      if (pending.length > 0) yield* pending.splice(0);
      if (failure) throw failure;
      if (done) break;
    }
    parser.reset({ consume: true });
    if (pending.length > 0) yield* pending.splice(0);
    if (failure) throw failure;
    // A stream that ends without [DONE] or a finish reason was cut: never report it as success.
    if (!done && !finish) throw truncatedStream('openai');
    yield* splitter.flush();
    yield { type: 'finish', reason: finish ?? 'stop' };
  }
}
