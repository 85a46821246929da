/** Response headers that several route groups send, built in one place. */
import type { QuotaStamp } from '../domain/types.js';

/** Replies that carry a caller's private data are never cached by a proxy or the browser. */
export const NO_STORE: Readonly<Record<string, string>> = Object.freeze({ 'Cache-Control': 'no-store' });

/** RateLimit-Limit / -Remaining / -Reset for a quota stamp. */
export function rateLimitHeaders(stamp: QuotaStamp): Record<string, string> {
  return {
    'RateLimit-Limit': String(stamp.limit),
    'RateLimit-Remaining': String(stamp.remaining),
    'RateLimit-Reset': String(stamp.resetSeconds),
  };
}
