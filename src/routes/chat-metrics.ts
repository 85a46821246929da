/**
 * The metrics seam around the core's event stream: time to first token and output tokens are
 * read off the events every chat route already consumes, so the core records nothing itself.
 * A plain observer rather than a wrapping generator: it adds no promise hop per event.
 */
import type { ChatEvent } from '../domain/types.js';
import type { Metrics } from '../metrics.js';

/** Watches one request's events and records its chat metrics. */
export class ChatObserver {
  private firstTokenSeen = false;

  constructor(
    private readonly metrics: Metrics,
    private readonly provider: string,
    private readonly acceptedAt: number,
  ) {}

  /** Takes one event into account. */
  see(event: ChatEvent): void {
    if ((event.type === 'delta' || event.type === 'thinking' || event.type === 'tool_call') && !this.firstTokenSeen) {
      this.firstTokenSeen = true;
      this.metrics.timeToFirstToken.observe({ provider: this.provider }, (performance.now() - this.acceptedAt) / 1000);
    } else if (event.type === 'done') {
      this.metrics.outputTokens.inc({ provider: this.provider }, event.usage.output_tokens);
    }
  }
}
