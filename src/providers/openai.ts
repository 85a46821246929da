/**
 * Any OpenAI-compatible `/v1/chat/completions` server, streamed as SSE with `include_usage`.
 * Reasoning arrives as `reasoning_content` (DeepSeek, vLLM), `reasoning` (OpenRouter, Ollama's
 * compatibility layer) or `<think>` tags inside `content`; all become thinking events.
 */
import * as v from 'valibot';
import type { FinishReason } from '../domain/types.js';
import { sseFrames } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, type UpstreamError, streamError, truncatedStream } from '../upstream/upstream-error.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderRequest, ProviderUsage } from './types.js';

const Text = v.nullish(v.string());
const CompletionChunk = v.looseObject({
  choices: v.optional(
    v.array(
      v.looseObject({
        delta: v.optional(v.looseObject({ content: Text, reasoning_content: Text, reasoning: Text })),
        finish_reason: v.nullish(v.string()),
      }),
    ),
  ),
  usage: v.nullish(v.looseObject({ prompt_tokens: v.optional(v.number()), completion_tokens: v.optional(v.number()) })),
  error: v.optional(v.unknown()),
});

/** Maps OpenAI finish reasons onto the contract's three. */
function openAiFinish(reason: string): FinishReason {
  if (reason === 'length') return 'length';
  if (reason === 'content_filter') return 'error';
  return 'stop';
}

/** The request body in OpenAI's dialect. */
function openAiBody(request: ProviderRequest): Record<string, unknown> {
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

  constructor(private readonly client: UpstreamClient) {}

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent[]> {
    const base = (request.model.baseUrl ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (request.model.apiKey) headers.authorization = `Bearer ${request.model.apiKey}`;
    const call = { subject: 'openai', url: `${base}/chat/completions`, headers, body: openAiBody(request) };

    const splitter = new ThinkTagSplitter();
    let finish: FinishReason | undefined;
    let usage: ProviderUsage | undefined;
    let done = false;
    const body = this.client.stream(call, signal);
    for await (const frames of sseFrames(body, 'openai', this.client.settings.maxFrameBytes)) {
      const events: ProviderEvent[] = [];
      let failure: UpstreamError | undefined;
      for (const frame of frames) {
        if (frame.data === '[DONE]') {
          done = true;
          break;
        }
        let json: unknown;
        try {
          json = JSON.parse(frame.data);
        } catch {
          failure = malformedFrame('openai');
          break;
        }
        const parsed = v.safeParse(CompletionChunk, json);
        if (!parsed.success) {
          failure = malformedFrame('openai');
          break;
        }
        const chunk = parsed.output;
        if (chunk.error !== undefined || frame.event === 'error') {
          failure = streamError('openai');
          break;
        }
        const choice = chunk.choices?.[0];
        const reasoning = choice?.delta?.reasoning_content ?? choice?.delta?.reasoning;
        if (typeof reasoning === 'string' && reasoning.length > 0) events.push({ type: 'thinking', text: reasoning });
        const content = choice?.delta?.content;
        if (typeof content === 'string' && content.length > 0) events.push(...splitter.push(content));
        if (choice?.finish_reason) finish = openAiFinish(choice.finish_reason);
        if (chunk.usage) usage = { inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 };
      }
      // Frames before a bad one in the same read still go out before the error.
      if (events.length > 0) yield events;
      if (failure) throw failure;
      if (done) break;
    }
    // A stream that ends without [DONE] or a finish reason was cut: never report it as success.
    if (!done && !finish) throw truncatedStream('openai');
    yield [...splitter.flush(), { type: 'finish', reason: finish ?? 'stop', usage }];
  }
}
