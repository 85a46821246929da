/**
 * Ollama's native `/api/chat`, streamed as NDJSON: one JSON object per line with
 * `message.content` / `message.thinking`, the last with `done: true`, `done_reason` and token
 * counts. Deep thinking is Ollama's `think` flag; older reasoning models still put `<think>`
 * tags in content, which are split out too.
 */
import * as v from 'valibot';
import type { FinishReason } from '../domain/types.js';
import { ndjsonLines } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, type UpstreamError, streamError, truncatedStream } from '../upstream/upstream-error.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';

const OllamaLine = v.looseObject({
  message: v.optional(v.looseObject({ content: v.optional(v.string()), thinking: v.optional(v.string()) })),
  done: v.optional(v.boolean()),
  done_reason: v.optional(v.string()),
  prompt_eval_count: v.optional(v.number()),
  eval_count: v.optional(v.number()),
  error: v.optional(v.unknown()),
});
type OllamaLine = v.InferOutput<typeof OllamaLine>;

/** The request body in Ollama's dialect. */
function ollamaBody(request: ProviderRequest): Record<string, unknown> {
  const system = systemText(request);
  const options: Record<string, number> = {};
  if (request.temperature !== undefined) options.temperature = request.temperature;
  if (request.maxTokens !== undefined) options.num_predict = request.maxTokens;
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages: [...(system ? [{ role: 'system', content: system }] : []), ...conversation(request)],
    stream: true,
    think: request.deepThinking,
  };
  if (Object.keys(options).length > 0) body.options = options;
  return body;
}

/** Maps Ollama's done_reason onto the contract's three. */
function ollamaFinish(reason: string | undefined): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

/** Streams replies from Ollama's native chat API. */
export class OllamaProvider implements ChatProvider {
  readonly name = 'ollama' as const;

  constructor(private readonly client: UpstreamClient) {}

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent[]> {
    const base = (request.model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '');
    const splitter = new ThinkTagSplitter();
    let finished: OllamaLine | undefined;
    const call = { subject: 'ollama', url: `${base}/api/chat`, headers: { accept: 'application/x-ndjson' }, body: ollamaBody(request) };
    for await (const lines of ndjsonLines(this.client.stream(call, signal), 'ollama', this.client.settings.maxFrameBytes)) {
      const events: ProviderEvent[] = [];
      let failure: UpstreamError | undefined;
      for (const line of lines) {
        let json: unknown;
        try {
          json = JSON.parse(line);
        } catch {
          failure = malformedFrame('ollama');
          break;
        }
        const parsed = v.safeParse(OllamaLine, json);
        if (!parsed.success) {
          failure = malformedFrame('ollama');
          break;
        }
        if (parsed.output.error !== undefined) {
          failure = streamError('ollama');
          break;
        }
        const thinking = parsed.output.message?.thinking;
        if (thinking) events.push({ type: 'thinking', text: thinking });
        const content = parsed.output.message?.content;
        if (content) events.push(...splitter.push(content));
        if (parsed.output.done) {
          finished = parsed.output;
          break;
        }
      }
      // Frames before a bad one in the same read still go out before the error.
      if (events.length > 0) yield events;
      if (failure) throw failure;
      if (finished) break;
    }
    if (!finished) throw truncatedStream('ollama');
    yield [
      ...splitter.flush(),
      {
        type: 'finish',
        reason: ollamaFinish(finished.done_reason),
        usage: { inputTokens: finished.prompt_eval_count ?? 0, outputTokens: finished.eval_count ?? 0 },
      },
    ];
  }
}
