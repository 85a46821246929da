/**
 * The metrics seam around the core's event stream: time to first token and output tokens are
 * read off the events every chat route already consumes, so the core records nothing itself; when
 * the reply ends, the same observer leaves the request's usage record. A plain observer rather
 * than a wrapping generator: it adds no promise hop per event.
 */
import type { ChatEvent } from '../domain/types.js';
import { ERROR_CATALOGUE } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { UsageEntry, UsageLog } from '../quota/usage.js';

/** What the usage record of a request starts from; the rest is read off its events. */
export interface UsageContext {
  log: UsageLog;
  caller: UsageEntry['caller'];
  route: string;
  model: string;
  /** The prompt's token estimate, for a request that ended before the upstream reported usage. */
  promptTokens: number;
}

/** Watches one request's events and records its chat metrics and usage. */
export class ChatObserver {
  private firstTokenSeen = false;
  private answerChars = 0;
  private done: Extract<ChatEvent, { type: 'done' }> | undefined;
  private failedStatus: number | undefined;
  private finished = false;

  constructor(
    private readonly metrics: Metrics,
    private readonly provider: string,
    private readonly acceptedAt: number,
    private readonly usage?: UsageContext,
  ) {}

  /** Takes one event into account. */
  see(event: ChatEvent): void {
    if ((event.type === 'delta' || event.type === 'thinking' || event.type === 'tool_call') && !this.firstTokenSeen) {
      this.firstTokenSeen = true;
      this.metrics.timeToFirstToken.observe({ provider: this.provider }, (performance.now() - this.acceptedAt) / 1000);
    }
    if (event.type === 'delta') this.answerChars += event.text.length;
    else if (event.type === 'done') {
      this.done = event;
      this.metrics.outputTokens.inc({ provider: this.provider }, event.usage.output_tokens);
    } else if (event.type === 'error') this.failedStatus = ERROR_CATALOGUE[event.code].status;
  }

  /** The reply failed with this status before (or instead of) an `error` event. */
  fail(status: number): void {
    this.failedStatus ??= status;
  }

  /** The reply ended (however it did): leaves its usage record, once. */
  finish(): void {
    if (this.finished || !this.usage) return;
    this.finished = true;
    const { done } = this;
    this.usage.log.record({
      caller: this.usage.caller,
      route: this.usage.route,
      model: done?.model ?? this.usage.model,
      inputTokens: done ? done.usage.input_tokens : this.usage.promptTokens,
      outputTokens: done ? done.usage.output_tokens : Math.ceil(this.answerChars / 4),
      // Neither done nor an error: the client left (499, as the request metrics say).
      status: done ? 200 : (this.failedStatus ?? 499),
    });
  }
}
