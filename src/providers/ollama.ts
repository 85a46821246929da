/**
 * Ollama's native `/api/chat`, streamed as NDJSON: one JSON object per line with
 * `message.content` / `message.thinking`, the last with `done: true`, `done_reason` and token
 * counts. Deep thinking is Ollama's `think` flag; older reasoning models still put `<think>`
 * tags in content, which are split out too.
 */
import { randomUUID } from 'node:crypto';
import type { ModelConfig } from '../config/index.js';
import type { FinishReason } from '../domain/types.js';
import { type Dialect, readNdjson } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, streamError, truncatedStream } from '../upstream/upstream-error.js';
import { arrayField, numberField, objectField, objectOf, readFrame, stringField, WRONG } from './frame-check.js';
import { openAiTools } from './openai-messages.js';
import { argumentsObject } from './tool-arguments.js';
import { conversation, systemText } from './prompt.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ChatProvider, ProviderEvent, ProviderMessage, ProviderRequest, ProviderStream } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** What one NDJSON line says, read with every field checked; undefined when it is malformed. */
interface OllamaLine {
  content: string | undefined;
  thinking: string | undefined;
  done: boolean;
  doneReason: string | undefined;
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  /** Whole tool calls: Ollama sends each call complete in one line, arguments as an object. */
  toolCalls: Array<{ id: string | undefined; name: string; arguments: string }> | undefined;
  error: boolean;
}

function readToolCalls(message: Record<string, unknown> | undefined): OllamaLine['toolCalls'] | typeof WRONG {
  const calls = arrayField(message, 'tool_calls');
  if (calls === undefined || calls === WRONG) return calls;
  const read: NonNullable<OllamaLine['toolCalls']> = [];
  for (const item of calls) {
    const call = objectOf(item);
    const fn = objectField(call, 'function');
    if (!fn || fn === WRONG) return WRONG;
    const id = stringField(call, 'id');
    const name = stringField(fn, 'name');
    const args = fn.arguments;
    if (id === WRONG || typeof name !== 'string') return WRONG;
    read.push({ id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) });
  }
  return read;
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
  const toolCalls = readToolCalls(message);
  if (Object.values(fields).includes(WRONG) || toolCalls === WRONG) return undefined;
  return {
    ...(fields as Omit<OllamaLine, 'done' | 'error' | 'toolCalls'>),
    toolCalls,
    done: done === true,
    error: line.error !== undefined,
  };
}

const DATA_URL = /^data:[^;,]+;base64,(.*)$/s;

/** One message in Ollama's shape; `toolNames` remembers which tool each earlier call id named. */
function ollamaMessage(message: ProviderMessage, toolNames: Map<string, string>): Record<string, unknown> {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'user':
      // Remote image URLs are refused at the edge (this provider has `remoteImages: false`).
      return message.images && message.images.length > 0
        ? { role: 'user', content: message.content, images: message.images.map((image) => DATA_URL.exec(image.url)?.[1] ?? '') }
        : { role: 'user', content: message.content };
    case 'assistant':
      if (!message.toolCalls || message.toolCalls.length === 0) return { role: 'assistant', content: message.content };
      for (const call of message.toolCalls) toolNames.set(call.id, call.name);
      return {
        role: 'assistant',
        content: message.content,
        tool_calls: message.toolCalls.map((call) => ({ function: { name: call.name, arguments: argumentsObject(call.arguments) } })),
      };
    case 'tool': {
      const name = toolNames.get(message.toolCallId);
      return { role: 'tool', content: message.content, ...(name ? { tool_name: name } : {}) };
    }
  }
}

/** The conversation in Ollama's shape: images as base64, tool calls with object arguments, tool results named. */
function ollamaMessages(messages: ReadonlyArray<ProviderMessage>): Array<Record<string, unknown>> {
  const toolNames = new Map<string, string>();
  return messages.map((message) => ollamaMessage(message, toolNames));
}

/** The request body in Ollama's dialect. */
function ollamaBody(request: ProviderRequest): Record<string, unknown> {
  const system = systemText(request);
  const extra = request.options;
  const options: Record<string, unknown> = {};
  if (request.temperature !== undefined) options.temperature = request.temperature;
  if (request.maxTokens !== undefined) options.num_predict = request.maxTokens;
  if (extra?.topP !== undefined) options.top_p = extra.topP;
  if (extra?.stop !== undefined) options.stop = extra.stop;
  if (extra?.seed !== undefined) options.seed = extra.seed;
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages: [...(system ? [{ role: 'system', content: system }] : []), ...ollamaMessages(conversation(request))],
    stream: true,
    think: request.deepThinking,
  };
  if (Object.keys(options).length > 0) body.options = options;
  // Ollama has no tool choice: "none" means the tools are not offered at all.
  if (extra?.tools && extra.tools.length > 0 && extra.toolChoice !== 'none') body.tools = openAiTools(extra.tools);
  const format = extra?.responseFormat;
  if (format?.type === 'json_object') body.format = 'json';
  else if (format?.type === 'json_schema' && format.schema) body.format = format.schema;
  return body;
}

/** Maps Ollama's done_reason onto the contract's three. */
function ollamaFinish(reason: string | undefined): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

/** Streams replies from Ollama's native chat API. */
export class OllamaProvider implements ChatProvider {
  readonly name = 'ollama' as const;
  /** Ollama reads images as base64 only: http(s) image URLs are refused at the edge. */
  readonly remoteImages = false;

  constructor(private readonly client: UpstreamClient) {}

  probeRequest(model: ModelConfig): { url: string; headers: Record<string, string> } {
    return { url: `${(model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '')}/api/tags`, headers: {} };
  }

  stream(request: ProviderRequest, signal: CancelSignal): ProviderStream {
    const base = (request.model.baseUrl ?? 'http://127.0.0.1:11434').replace(/\/+$/, '');
    const call = { subject: 'ollama', url: `${base}/api/chat`, headers: { accept: 'application/x-ndjson' }, body: ollamaBody(request) };
    return readNdjson(this.client.stream(call, signal), new OllamaReply(), 'ollama', this.client.settings.maxFrameBytes);
  }
}

/** One streamed `/api/chat` reply, line by line. */
class OllamaReply implements Dialect<string, ProviderEvent> {
  private readonly splitter = new ThinkTagSplitter();
  private finished: OllamaLine | undefined;
  private toolCalls = 0;

  frame(line: string, out: ProviderEvent[]): boolean {
    const parsed = readFrame(line, readOllamaLine);
    if (!parsed) throw malformedFrame('ollama');
    if (parsed.error) throw streamError('ollama');
    if (parsed.thinking) out.push({ type: 'thinking', text: parsed.thinking });
    if (parsed.content) this.splitter.push(parsed.content, out);
    for (const call of parsed.toolCalls ?? []) {
      // Ollama sends each call whole; an id is made when it has none, so the client can answer it.
      const id = call.id ?? `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
      out.push({ type: 'tool_call', index: this.toolCalls, id, name: call.name, arguments: call.arguments });
      this.toolCalls += 1;
    }
    if (!parsed.done) return false;
    this.finished = parsed;
    return true;
  }

  end(out: ProviderEvent[]): void {
    const finished = this.finished;
    if (!finished) throw truncatedStream('ollama');
    this.splitter.flush(out);
    out.push({
      type: 'finish',
      reason: this.toolCalls > 0 ? 'tool_calls' : ollamaFinish(finished.doneReason),
      usage: { inputTokens: finished.inputTokens ?? 0, outputTokens: finished.outputTokens ?? 0 },
    });
  }
}
