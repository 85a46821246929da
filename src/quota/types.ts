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
