/**
 * Ollama's native `/api/chat`, streamed as NDJSON: one JSON object per line with
 * `message.content` / `message.thinking`, the last with `done: true`, `done_reason` and token
 * counts. Deep thinking is Ollama's `think` flag; older reasoning models still put `<think>`
 * tags in content, which are split out too.
 */
import type { FinishReason } from '../domain/types.js';
import { malformedFrame, streamUpstream, truncatedStream, UpstreamFailure, type UpstreamTimeouts } from './upstream.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';

interface OllamaLine {
  message?: { content?: string; thinking?: string };
  done?: boolean;
  done_reason?: string;
  prompt_eval_count?: number;
  eval_count?: number;
  error?: unknown;
}

/** The request body in Ollama's dialect. */
export function ollamaBody(request: ProviderRequest): Record<string, unknown> {
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
export function ollamaFinish(reason: string | undefined): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

/** Streams replies from Ollama's native chat API. */
export class OllamaProvider implements ChatProvider {
  readonly name = 'ollama' as const;

  constructor(private readonly timeouts: UpstreamTimeouts) {}

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent> {
    const base = (request.model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '');
    const splitter = new ThinkTagSplitter();
    let buffered = '';
    let finished: OllamaLine | undefined;

    const handle = function* (line: string): Generator<ProviderEvent> {
      if (line.trim().length === 0) return;
      let parsed: OllamaLine;
      try {
        parsed = JSON.parse(line) as OllamaLine;
      } catch {
        throw malformedFrame('ollama');
      }
      if (parsed.error !== undefined) {
        throw new UpstreamFailure('upstream_error', 'The ollama upstream reported an error in the middle of the reply.', 'stream_error', false);
      }
      const thinking = parsed.message?.thinking;
      if (thinking) yield { type: 'thinking', text: thinking };
      const content = parsed.message?.content;
      if (content) yield* splitter.push(content);
      if (parsed.done) finished = parsed;
    };

    const call = { provider: 'ollama', url: `${base}/api/chat`, headers: { accept: 'application/x-ndjson' }, body: ollamaBody(request) };
    for await (const text of streamUpstream(call, this.timeouts, signal)) {
      buffered += text;
      let newline = buffered.indexOf('\n');
      while (newline !== -1 && !finished) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        yield* handle(line);
        newline = buffered.indexOf('\n');
      }
      if (finished) break;
    }
    // The last line may come without a trailing newline.
    if (!finished && buffered.length > 0) yield* handle(buffered);
    if (!finished) throw truncatedStream('ollama');
    const done: OllamaLine = finished;
    yield* splitter.flush();
    yield { type: 'usage', inputTokens: done.prompt_eval_count ?? 0, outputTokens: done.eval_count ?? 0 };
    yield { type: 'finish', reason: ollamaFinish(done.done_reason) };
  }
}
