/**
 * OpenAI's Chat Completions wire format over the one ChatEvent sequence: the `chat.completion`
 * body for non-streamed replies and `chat.completion.chunk` SSE frames for streams. Colloquy's
 * own results ride along in extra fields (`sources`, `quota`, `session_id`) that OpenAI clients
 * ignore and ours can read.
 */
import { randomFillSync } from 'node:crypto';
import { type Attempt, assertNever, type ChatEvent, type FinishReason, type QuotaStamp, type Source, type Usage } from '../domain/types.js';
import type { ErrorCode } from '../errors.js';
import { openAiError } from './v1-errors.js';

/** OpenAI's finish reasons: a refusal or filter (`error` in the contract) is `content_filter`. */
function openAiFinishReason(reason: FinishReason): string {
  return reason === 'error' ? 'content_filter' : reason;
}

function openAiUsage(usage: Usage): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

function quotaField(stamp: QuotaStamp): { plan: string; remaining: number; remaining_tokens?: number; reset: string } {
  return {
    plan: stamp.plan,
    remaining: stamp.remaining,
    ...(stamp.tokens ? { remaining_tokens: stamp.tokens.remaining } : {}),
    reset: stamp.reset,
  };
}

/** Random bytes drawn for completion ids in one call: a call per id cost 3.7 µs per request. */
const ID_BYTES = 12;
const idPool = Buffer.alloc(ID_BYTES * 256);
let idOffset = idPool.length;

/** A completion id in OpenAI's form (`chatcmpl-` and 24 random hex characters). */
export function completionId(): string {
  if (idOffset === idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const id = `chatcmpl-${idPool.toString('hex', idOffset, idOffset + ID_BYTES)}`;
  idOffset += ID_BYTES;
  return id;
}

interface AssembledCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** Folds events into one `chat.completion` body. */
export class CompletionCollector {
  private readonly id = completionId();
  private readonly created = Math.floor(Date.now() / 1000);
  private model = '';
  private sessionId: string | undefined;
  private quota: QuotaStamp | undefined;
  private content = '';
  private reasoning = '';
  private readonly toolCalls: AssembledCall[] = [];
  private sources: Source[] | undefined;
  private finished: { finishReason: FinishReason; usage: Usage; model: string; attempts: Attempt[] } | undefined;
  private failed = false;

  /** Takes one event into account. */
  add(event: ChatEvent): void {
    switch (event.type) {
      case 'start':
        this.model = event.model;
        this.sessionId = event.sessionId;
        this.quota = event.quota;
        break;
      case 'sources':
        this.sources = event.sources;
        break;
      case 'thinking':
        this.reasoning += event.text;
        break;
      case 'delta':
        this.content += event.text;
        break;
      case 'tool_call': {
        const call = this.toolCalls[event.index];
        if (call) call.function.arguments += event.arguments;
        else
          this.toolCalls[event.index] = {
            id: event.id ?? '',
            type: 'function',
            function: { name: event.name ?? '', arguments: event.arguments },
          };
        break;
      }
      case 'done':
        this.finished = { finishReason: event.finishReason, usage: event.usage, model: event.model, attempts: event.attempts };
        // The settled stamp (token budget) replaces the reserved one.
        this.quota = event.quota;
        break;
      case 'error':
        this.failed = true;
        break;
      case 'progress':
      case 'search':
        break;
      default:
        assertNever(event);
    }
  }

  /** The `chat.completion` body, or undefined when the sequence did not end in `done`. */
  body(): Record<string, unknown> | undefined {
    if (!this.finished || this.failed || !this.quota) return undefined;
    const calls = this.toolCalls.filter((call) => call !== undefined);
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: calls.length > 0 && this.content.length === 0 ? null : this.content,
      refusal: null,
    };
    if (calls.length > 0) message.tool_calls = calls;
    if (this.reasoning.length > 0) message.reasoning_content = this.reasoning;
    const body: Record<string, unknown> = {
      id: this.id,
      object: 'chat.completion',
      created: this.created,
      model: this.finished.model || this.model,
      choices: [{ index: 0, message, finish_reason: openAiFinishReason(this.finished.finishReason), logprobs: null }],
      usage: openAiUsage(this.finished.usage),
      quota: quotaField(this.quota),
    };
    if (this.sources) body.sources = this.sources;
    if (this.sessionId !== undefined) body.session_id = this.sessionId;
    if (this.finished.attempts.length > 0) body.attempts = this.finished.attempts;
    return body;
  }
}

/** The SSE trailer OpenAI streams end with. */
export const DONE_FRAME = 'data: [DONE]\n\n';

/** `chat.completion.chunk` frames: unnamed `data:` events only (the SDK turns a named event into a chunk). */
export class ChunkEncoder {
  private readonly id = completionId();
  private readonly created = Math.floor(Date.now() / 1000);
  private model = '';
  private sessionId: string | undefined;
  private quota: QuotaStamp | undefined;
  private sources: Source[] | undefined;
  private prefix = '';

  constructor(private readonly includeUsage: boolean) {}

  private chunk(delta: Record<string, unknown>, finishReason: string | null = null, extra?: Record<string, unknown>): string {
    // The fixed part of every chunk is built once; only the choice changes.
    const choice = JSON.stringify([{ index: 0, delta, finish_reason: finishReason, logprobs: null }]);
    const tail = extra ? `,${JSON.stringify(extra).slice(1, -1)}` : '';
    return `${this.prefix}${choice}${tail}}\n\n`;
  }

  /** The frame(s) for one event, or undefined for events the stream does not carry. */
  encode(event: ChatEvent): string | undefined {
    switch (event.type) {
      case 'start':
        this.model = event.model;
        this.sessionId = event.sessionId;
        this.quota = event.quota;
        this.prefix = `data: {"id":"${this.id}","object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(this.model)},"choices":`;
        return this.chunk({ role: 'assistant', content: '' });
      case 'thinking':
        return this.chunk({ reasoning_content: event.text });
      case 'delta':
        return this.chunk({ content: event.text });
      case 'tool_call': {
        const call: Record<string, unknown> = { index: event.index };
        if (event.id !== undefined) {
          call.id = event.id;
          call.type = 'function';
        }
        call.function = event.name !== undefined ? { name: event.name, arguments: event.arguments } : { arguments: event.arguments };
        return this.chunk({ tool_calls: [call] });
      }
      case 'sources':
        this.sources = event.sources;
        return undefined;
      case 'done': {
        // A fallback answered: the last chunks name the model that did.
        if (event.model && event.model !== this.model) {
          this.model = event.model;
          this.prefix = `data: {"id":"${this.id}","object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(this.model)},"choices":`;
        }
        const extra: Record<string, unknown> = {};
        if (event.attempts.length > 0) extra.attempts = event.attempts;
        extra.quota = quotaField(event.quota);
        if (this.sources) extra.sources = this.sources;
        if (this.sessionId !== undefined) extra.session_id = this.sessionId;
        let frames = this.chunk({}, openAiFinishReason(event.finishReason), extra);
        if (this.includeUsage) {
          frames += `data: ${JSON.stringify({
            id: this.id,
            object: 'chat.completion.chunk',
            created: this.created,
            model: this.model,
            choices: [],
            usage: openAiUsage(event.usage),
          })}\n\n`;
        }
        return frames;
      }
      case 'error':
        return `data: ${JSON.stringify(openAiError(event.code as ErrorCode, event.message))}\n\n`;
      case 'progress':
      case 'search':
        return undefined;
      default:
        return assertNever(event);
    }
  }
}
