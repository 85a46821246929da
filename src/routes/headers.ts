/** Response headers that several route groups send, built in one place. */
import type { QuotaStamp } from '../domain/types.js';

/** Replies that carry a caller's private data are never cached by a proxy or the browser. */
export const NO_STORE: Readonly<Record<string, string>> = Object.freeze({ 'Cache-Control': 'no-store' });

/**
 * RateLimit-Limit / -Remaining / -Reset for a quota stamp (the request count), and the IETF
 * httpapi draft's `RateLimit-Policy` and `RateLimit` with one policy per dimension: "requests",
 * and "tokens" where the plan has a token budget.
 */
export function rateLimitHeaders(stamp: QuotaStamp): Record<string, string> {
  // `q` is the quota, `r` what remains, `t` the seconds until it resets.
  let policy = `"requests";q=${stamp.limit}`;
  let state = `"requests";r=${stamp.remaining};t=${stamp.resetSeconds}`;
  if (stamp.tokens) {
    policy += `, "tokens";q=${stamp.tokens.limit}`;
    state += `, "tokens";r=${stamp.tokens.remaining};t=${stamp.tokens.resetSeconds}`;
  }
  return {
    'RateLimit-Limit': String(stamp.limit),
    'RateLimit-Remaining': String(stamp.remaining),
    'RateLimit-Reset': String(stamp.resetSeconds),
    'RateLimit-Policy': policy,
    RateLimit: state,
  };
}
