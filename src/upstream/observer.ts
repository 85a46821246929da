/**
 * The metrics and log seam of the upstream layer: every upstream call (a streamed chat reply, a
 * search, an image, an embeddings batch) reports here once how it ended, so upstream latency and
 * errors by provider are recorded in one place. Labels are provider names and catalogue codes,
 * never URLs, keys or user ids; the finer reason goes to the log only.
 */
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';

/** How a call ended, for the duration metric. */
export type CallOutcome = 'ok' | 'error' | 'timeout' | 'aborted';

/** Why a call failed: the catalogue code (metric label) and a finer reason (log only). */
export interface CallFailure {
  code: string;
  reason: string;
}

/** Told once how each upstream call went; nothing of it reaches a client. */
export interface UpstreamObserver {
  settled(provider: string, outcome: CallOutcome, seconds: number, failure?: CallFailure): void;
}

/** The observer that records every call in the shared registry and logs failures. */
export function recordUpstreamCalls(metrics: Pick<Metrics, 'upstreamDuration' | 'upstreamErrors'>, logger: Logger): UpstreamObserver {
  return {
    settled(provider, outcome, seconds, failure) {
      metrics.upstreamDuration.observe({ provider, outcome }, seconds);
      if (!failure) return;
      metrics.upstreamErrors.inc({ provider, code: failure.code });
      logger.warn({ provider, reason: failure.reason }, 'upstream failed');
    },
  };
}
