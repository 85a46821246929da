/** Plans and exact quotas: one reservation per accepted request, taken atomically in storage. */
import type { Caller } from '../auth/types.js';
import type { QuotaStamp } from '../chat/events.js';

export type Operation = 'chat' | 'search' | 'image';

export interface QuotaReservation {
  stamp: QuotaStamp;
  /** Gives the cost back (used when the upstream failed before producing anything); idempotent. */
  refund(): Promise<void>;
}

export interface QuotaService {
  /** Takes the operation's cost or throws ApiError `quota_exceeded` (429, Retry-After, RateLimit-*). */
  reserve(caller: Caller, operation: Operation): Promise<QuotaReservation>;
  /** RateLimit-Limit / -Remaining / -Reset headers for a stamp. */
  headers(stamp: QuotaStamp): Record<string, string>;
}

/** One subject's standing in its current window, as GET /api/chat/quota/{user_id} shows it. */
export interface QuotaStatus {
  plan: string;
  limit: number;
  used: number;
  remaining: number;
  /** ISO 8601 end of the current window. */
  reset: string;
  window_seconds: number;
}

/** Outcome of one atomic take from a counter. */
export interface CounterTake {
  ok: boolean;
  /** Units used in the window after the take (or at refusal). */
  used: number;
}

/**
 * Fixed-window counters in storage. Each call is one write transaction that reads the counter
 * inside it, so concurrent callers and other processes on the same environment cannot overspend.
 */
export interface QuotaCounterStore {
  /** Adds `cost` to the subject's window unless that would pass `limit`. */
  take(subject: string, windowStart: number, limit: number, cost: number): Promise<CounterTake>;
  /** Gives `cost` back, only if the subject is still in the same window. */
  giveBack(subject: string, windowStart: number, cost: number): Promise<void>;
  /** Units used in the given window (0 when the stored counter belongs to an older one). */
  used(subject: string, windowStart: number): number;
}

/** The quota view of a subject: whose counter and which plan (enough to build a status without a Caller). */
export interface QuotaSubject {
  id: string;
  plan: string;
}
