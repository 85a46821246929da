/**
 * Any OpenAI-compatible `/v1/chat/completions` server, streamed as SSE with `include_usage`.
 * Reasoning arrives as `reasoning_content` (DeepSeek, vLLM), `reasoning` (OpenRouter, Ollama's
 * compatibility layer) or `<think>` tags inside `content`; all become thinking events.
 */
import type { ModelConfig } from '../config/index.js';
import type { FinishReason } from '../domain/types.js';
import { type Dialect, type EventSourceMessage, readSse } from '../upstream/frames.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import { malformedFrame, streamError, truncatedStream } from '../upstream/upstream-error.js';
import { conversation, systemText } from './prompt.js';
import { arrayField, firstObjectOf, numberField, objectField, objectOf, readFrame, stringField, WRONG } from './frame-check.js';
import { addOpenAiOptions, openAiMessage } from './openai-messages.js';
import { ThinkTagSplitter } from './think-tags.js';
import type { ToolCallFragment } from '../domain/types.js';
import type { ChatProvider, ProviderEvent, ProviderRequest, ProviderStream, ProviderUsage } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** What one `chat.completion.chunk` says, read with every field checked; undefined when it is malformed. */
interface CompletionChunk {
  content: string | undefined;
  reasoning: string | undefined;
  finishReason: string | undefined;
  usage: ProviderUsage | undefined;
  toolCalls: ToolCallFragment[] | undefined;
  error: boolean;
}

/** The tool-call fragments of a delta (`delta.tool_calls`), checked; WRONG when one is malformed. */
function readToolCalls(delta: Record<string, unknown> | undefined): ToolCallFragment[] | undefined | typeof WRONG {
  const calls = arrayField(delta, 'tool_calls');
  if (calls === undefined || calls === WRONG) return calls;
  const fragments: ToolCallFragment[] = [];
  for (const item of calls) {
    const call = objectOf(item);
    const fn = objectField(call, 'function');
    if (!call || fn === WRONG) return WRONG;
    const index = numberField(call, 'index');
    const id = stringField(call, 'id');
    const name = stringField(fn, 'name');
    const args = stringField(fn, 'arguments');
    if (index === WRONG || id === WRONG || name === WRONG || args === WRONG) return WRONG;
    const fragment: ToolCallFragment = { index: index ?? fragments.length, arguments: args ?? '' };
    if (id !== undefined) fragment.id = id;
    if (name !== undefined) fragment.name = name;
    fragments.push(fragment);
  }
  return fragments;
}

function readCompletionChunk(json: unknown): CompletionChunk | undefined {
  const chunk = objectOf(json);
  if (!chunk) return undefined;
  const choice = firstObjectOf(chunk, 'choices');
  if (choice === WRONG) return undefined;
  const delta = objectField(choice, 'delta');
  const usage = objectField(chunk, 'usage');
  if (delta === WRONG || usage === WRONG) return undefined;
  const content = stringField(delta, 'content');
  const reasoning = stringField(delta, 'reasoning_content');
  const alternateReasoning = stringField(delta, 'reasoning');
  const finishReason = stringField(choice, 'finish_reason');
  const toolCalls = readToolCalls(delta);
  if (toolCalls === WRONG) return undefined;
  const inputTokens = numberField(usage, 'prompt_tokens');
  const outputTokens = numberField(usage, 'completion_tokens');
  if ([content, reasoning, alternateReasoning, finishReason, inputTokens, outputTokens].includes(WRONG)) return undefined;
  return {
    content: content as string | undefined,
    reasoning: (reasoning ?? alternateReasoning) as string | undefined,
    finishReason: finishReason as string | undefined,
    usage: usage
      ? { inputTokens: (inputTokens as number | undefined) ?? 0, outputTokens: (outputTokens as number | undefined) ?? 0 }
      : undefined,
    toolCalls,
    error: chunk.error !== undefined,
  };
}

/** Maps OpenAI finish reasons onto the contract's three. */
function openAiFinish(reason: string): FinishReason {
  if (reason === 'length') return 'length';
  if (reason === 'content_filter') return 'error';
  if (reason === 'tool_calls' || reason === 'function_call') return 'tool_calls';
  return 'stop';
}

/** The request body in OpenAI's dialect. */
function openAiBody(request: ProviderRequest): Record<string, unknown> {
  const system = systemText(request);
  const messages = [...(system ? [{ role: 'system', content: system }] : []), ...conversation(request).map(openAiMessage)];
  const body: Record<string, unknown> = {
    model: request.model.upstreamModel,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  };
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens;
  if (request.deepThinking) body.reasoning_effort = 'high';
  addOpenAiOptions(body, request.options);
  return body;
}

/** Streams replies from any OpenAI-compatible chat completions endpoint. */
export class OpenAiProvider implements ChatProvider {
  readonly name = 'openai' as const;

  constructor(private readonly client: UpstreamClient) {}

  probeRequest(model: ModelConfig): { url: string; headers: Record<string, string> } {
    const base = (model.baseUrl ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
    return { url: `${base}/models`, headers: model.apiKey ? { authorization: `Bearer ${model.apiKey}` } : {} };
  }

  stream(request: ProviderRequest, signal: CancelSignal): ProviderStream {
    const base = (request.model.baseUrl ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (request.model.apiKey) headers.authorization = `Bearer ${request.model.apiKey}`;
    const call = { subject: 'openai', url: `${base}/chat/completions`, headers, body: openAiBody(request) };
    return readSse(this.client.stream(call, signal), new OpenAiReply(), 'openai', this.client.settings.maxFrameBytes);
  }
}

/** One streamed `chat.completion.chunk` reply, frame by frame. */
class OpenAiReply implements Dialect<EventSourceMessage, ProviderEvent> {
  private readonly splitter = new ThinkTagSplitter();
  private finish: FinishReason | undefined;
  private usage: ProviderUsage | undefined;

  frame(frame: EventSourceMessage, out: ProviderEvent[]): boolean {
    if (frame.data === '[DONE]') return true;
    const chunk = readFrame(frame.data, readCompletionChunk);
    if (!chunk) throw malformedFrame('openai');
    if (chunk.error || frame.event === 'error') throw streamError('openai');
    if (chunk.reasoning) out.push({ type: 'thinking', text: chunk.reasoning });
    if (chunk.content) this.splitter.push(chunk.content, out);
    if (chunk.toolCalls) for (const fragment of chunk.toolCalls) out.push({ type: 'tool_call', ...fragment });
    if (chunk.finishReason) this.finish = openAiFinish(chunk.finishReason);
    if (chunk.usage) this.usage = chunk.usage;
    return false;
  }

  end(out: ProviderEvent[], terminal: boolean): void {
    // A stream that ends without [DONE] or a finish reason was cut: never report it as success.
    if (!terminal && !this.finish) throw truncatedStream('openai');
    this.splitter.flush(out);
    out.push({ type: 'finish', reason: this.finish ?? 'stop', usage: this.usage });
  }
}
