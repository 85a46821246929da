/**
 * Ollama's native `/api/chat`, streamed as NDJSON: one JSON object per line with
 * `message.content` / `message.thinking`, the last with `done: true`, `done_reason` and token
 * counts. Deep thinking is Ollama's `think` flag; older reasoning models still put `<think>`
 * tags in content, which are split out too.
 */
import type { ModelConfig } from '../config/index.js';
import type { FinishReason } from '../domain/types.js';
import { ndjsonLines } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, type UpstreamError, streamError, truncatedStream } from '../upstream/upstream-error.js';
import { numberField, objectField, objectOf, readFrame, stringField, WRONG } from './frame-check.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderRequest } from './types.js';

/** What one NDJSON line says, read with every field checked; undefined when it is malformed. */
interface OllamaLine {
  content: string | undefined;
  thinking: string | undefined;
  done: boolean;
  doneReason: string | undefined;
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  error: boolean;
}

function readOllamaLine(json: unknown): OllamaLine | undefined {
  const line = objectOf(json);
  if (!line) return undefined;
  const message = objectField(line, 'message');
  if (message === WRONG) return undefined;
  const done = line.done;
  if (done !== undefined && typeof done !== 'boolean') return undefined;
  const fields = {
    content: stringField(message, 'content'),
    thinking: stringField(message, 'thinking'),
    doneReason: stringField(line, 'done_reason'),
    inputTokens: numberField(line, 'prompt_eval_count'),
    outputTokens: numberField(line, 'eval_count'),
  };
  if (Object.values(fields).includes(WRONG)) return undefined;
  return { ...(fields as Omit<OllamaLine, 'done' | 'error'>), done: done === true, error: line.error !== undefined };
}

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

  probeRequest(model: ModelConfig): { url: string; headers: Record<string, string> } {
    return { url: `${(model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '')}/api/tags`, headers: {} };
  }

  async *stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent[]> {
    const base = (request.model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '');
    const splitter = new ThinkTagSplitter();
    let finished: OllamaLine | undefined;
    const call = { subject: 'ollama', url: `${base}/api/chat`, headers: { accept: 'application/x-ndjson' }, body: ollamaBody(request) };
    for await (const lines of ndjsonLines(this.client.stream(call, signal), 'ollama', this.client.settings.maxFrameBytes)) {
      const events: ProviderEvent[] = [];
      let failure: UpstreamError | undefined;
      for (const line of lines) {
        const parsed = readFrame(line, readOllamaLine);
        if (!parsed) {
          failure = malformedFrame('ollama');
          break;
        }
        if (parsed.error) {
          failure = streamError('ollama');
          break;
        }
        const thinking = parsed.thinking;
        if (thinking) events.push({ type: 'thinking', text: thinking });
        const content = parsed.content;
        if (content) events.push(...splitter.push(content));
        if (parsed.done) {
          finished = parsed;
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
        reason: ollamaFinish(finished.doneReason),
        usage: { inputTokens: finished.inputTokens ?? 0, outputTokens: finished.outputTokens ?? 0 },
      },
    ];
  }
}
