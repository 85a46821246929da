/**
 * The three encoders over one ChatEvent sequence: the JSON body collector (/api/chat/ and the
 * NDJSON `result` line), SSE frames (/stream) and NDJSON lines (/progress).
 */
import type { ErrorCode } from '../errors.js';
import { type Attempt, assertNever, type ChatEvent, type FinishReason, type Source, type Usage } from '../domain/types.js';

/** The /api/chat/ response body. */
export interface ChatResponseBody {
  response: string;
  model: string;
  plan: string;
  remaining: number;
  /** Tokens left in the plan's token budget after this request was settled (plans with tokens only). */
  remaining_tokens?: number;
  reset: string;
  timestamp: string;
  session_id?: string;
  finish_reason: FinishReason;
  usage: Usage;
  thinking?: string;
  sources?: Source[];
  search?: { provider: string; query: string; result_count: number };
  /** The models tried before the one that answered (`model`), when any was. */
  attempts?: Attempt[];
}

/** Folds events into the final body; `error` is set when the sequence ended in an error. */
export class ChatResultCollector {
  private model = '';
  private sessionId: string | undefined;
  private plan = '';
  private remaining = 0;
  private reset = '';
  private remainingTokens: number | undefined;
  private response = '';
  private thinking = '';
  private sources: Source[] | undefined;
  private search: ChatResponseBody['search'];
  private finished: { finishReason: FinishReason; usage: Usage; timestamp: string; model: string; attempts: Attempt[] } | undefined;
  error: { code: ErrorCode; message: string } | undefined;

  /** Takes one event into account. */
  add(event: ChatEvent): void {
    switch (event.type) {
      case 'start':
        this.model = event.model;
        this.sessionId = event.sessionId;
        this.plan = event.quota.plan;
        this.remaining = event.quota.remaining;
        this.reset = event.quota.reset;
        this.remainingTokens = event.quota.tokens?.remaining;
        break;
      case 'sources':
        this.sources = event.sources;
        break;
      case 'search':
        this.search = { provider: event.provider, query: event.query, result_count: event.resultCount };
        break;
      case 'thinking':
        this.thinking += event.text;
        break;
      case 'delta':
        this.response += event.text;
        break;
      case 'done':
        if (event.quota.tokens) this.remainingTokens = event.quota.tokens.remaining;
        this.finished = {
          finishReason: event.finishReason,
          usage: event.usage,
          timestamp: event.timestamp,
          model: event.model,
          attempts: event.attempts,
        };
        break;
      case 'error':
        this.error = { code: event.code, message: event.message };
        break;
      // Tool calls exist only on /v1 (the /api request has no tools to offer).
      case 'progress':
      case 'tool_call':
        break;
      default:
        assertNever(event);
    }
  }

  /** The complete body, or undefined when the sequence did not end in `done`. */
  body(): ChatResponseBody | undefined {
    if (!this.finished || this.error) return undefined;
    const body: ChatResponseBody = {
      response: this.response,
      model: this.finished.model || this.model,
      plan: this.plan,
      remaining: this.remaining,
      ...(this.remainingTokens !== undefined ? { remaining_tokens: this.remainingTokens } : {}),
      reset: this.reset,
      timestamp: this.finished.timestamp,
      finish_reason: this.finished.finishReason,
      usage: this.finished.usage,
    };
    if (this.sessionId !== undefined) body.session_id = this.sessionId;
    if (this.thinking.length > 0) body.thinking = this.thinking;
    if (this.sources) body.sources = this.sources;
    if (this.search) body.search = this.search;
    if (this.finished.attempts.length > 0) body.attempts = this.finished.attempts;
    return body;
  }
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** SSE frame for an event, or undefined for events the SSE stream does not carry. */
export class SseEncoder {
  private search: ChatResponseBody['search'];

  /** With a resumable stream's id, the `start` event carries it as `stream_id`. */
  constructor(private readonly streamId?: string) {}

  /** The frame for one event (progress is NDJSON-only; search rides on the sources event). */
  encode(event: ChatEvent): string | undefined {
    switch (event.type) {
      case 'start':
        return sse('start', {
          ...(this.streamId ? { stream_id: this.streamId } : {}),
          model: event.model,
          ...(event.sessionId !== undefined ? { session_id: event.sessionId } : {}),
          plan: event.quota.plan,
          remaining: event.quota.remaining,
          ...(event.quota.tokens ? { remaining_tokens: event.quota.tokens.remaining } : {}),
          reset: event.quota.reset,
        });
      case 'search':
        this.search = { provider: event.provider, query: event.query, result_count: event.resultCount };
        return undefined;
      case 'sources':
        return sse('sources', { sources: event.sources, ...(this.search ? { search: this.search } : {}) });
      case 'thinking':
        return sse('thinking', { text: event.text });
      case 'delta':
        return sse('delta', { text: event.text });
      case 'done':
        return sse('done', {
          finish_reason: event.finishReason,
          usage: event.usage,
          timestamp: event.timestamp,
          model: event.model,
          ...(event.attempts.length > 0 ? { attempts: event.attempts } : {}),
          ...(event.quota.tokens ? { remaining_tokens: event.quota.tokens.remaining } : {}),
        });
      case 'error':
        return sse('error', { error: { code: event.code, message: event.message } });
      case 'progress':
      case 'tool_call':
        return undefined;
      default:
        return assertNever(event);
    }
  }
}

/** NDJSON lines: progress, sources, and the last line (result or error). */
export class NdjsonEncoder {
  private readonly collector = new ChatResultCollector();

  /** With a resumable stream's id, the `accepted` line carries it and every line its `seq`. */
  constructor(
    private readonly acceptedAt: number,
    private readonly streamId?: string,
  ) {}

  /**
   * The line for one event, or undefined (deltas are folded into the final result). A resumed
   * stream passes the `result` the generation kept, since its early deltas may be gone.
   */
  encode(event: ChatEvent, resumed?: { seq: number; result?: Record<string, unknown> | undefined }): string | undefined {
    this.collector.add(event);
    const seq = resumed ? { seq: resumed.seq } : {};
    switch (event.type) {
      case 'progress': {
        const line: Record<string, unknown> = {
          type: 'progress',
          stage: event.stage,
          message: event.message,
          elapsed_ms: Math.round(performance.now() - this.acceptedAt),
          ...seq,
        };
        if (event.stage === 'accepted' && this.streamId) line.stream_id = this.streamId;
        if (event.outputTokens !== undefined) line.output_tokens = event.outputTokens;
        return `${JSON.stringify(line)}\n`;
      }
      case 'sources':
        return `${JSON.stringify({ type: 'sources', sources: event.sources, ...seq })}\n`;
      case 'done': {
        const body = resumed?.result ?? this.collector.body();
        return body ? `${JSON.stringify({ type: 'result', ...body, ...seq })}\n` : undefined;
      }
      case 'error':
        return `${JSON.stringify({ type: 'error', error: { code: event.code, message: event.message }, ...seq })}\n`;
      case 'start':
      case 'search':
      case 'thinking':
      case 'delta':
      case 'tool_call':
        return undefined;
      default:
        return assertNever(event);
    }
  }
}
