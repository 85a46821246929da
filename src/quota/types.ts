/** Plans and exact quotas: one reservation per accepted request, taken atomically in storage. */
import type { Caller, Operation, QuotaReservation } from '../domain/types.js';

export interface QuotaService {
  /** Takes the operation's cost or throws QuotaExceeded (the edge turns it into 429 with RateLimit headers). */
  reserve(caller: Caller, operation: Operation, tokenEstimate?: number): Promise<QuotaReservation>;
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
  /** The token budget's standing, when the plan has one. */
  tokens?: { limit: number; used: number; remaining: number; reset: string; window_seconds: number };
}

/** The quota view of a subject: whose counter and which plan (enough to build a status without a Caller). */
export interface QuotaSubject {
  id: string;
  plan: string;
}
