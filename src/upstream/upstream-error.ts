/**
 * The one error every upstream call fails with: a catalogue code (`upstream_error` or
 * `upstream_timeout`) and a client-safe sentence, plus a finer reason for logs and metrics that
 * never reaches a client. Upstream bodies are never quoted: they may echo a key.
 */
import { ApiError } from '../errors.js';

/** An upstream call that failed; `reason` is `timeout_<phase>`, `status_<n>`, `connect_<errno>`, `reset`, `malformed`, `truncated`, `frame_too_large` … */
export class UpstreamError extends ApiError {
  constructor(
    code: 'upstream_error' | 'upstream_timeout',
    message: string,
    readonly reason: string,
    readonly retryable = false,
    readonly retryAfterMs: number | undefined = undefined,
  ) {
    super(code, message);
  }
}

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/** The phases an upstream call can time out in. */
export type TimeoutPhase = 'connect' | 'first_byte' | 'idle';

/** The upstream did not connect, start answering, or keep answering in time. */
export function timeoutError(subject: string, phase: TimeoutPhase): UpstreamError {
  const what =
    phase === 'connect'
      ? 'could not be reached in time'
      : phase === 'first_byte'
        ? 'did not start answering in time'
        : 'stopped sending in the middle of the reply';
  return new UpstreamError('upstream_timeout', `The ${subject} upstream ${what}.`, `timeout_${phase}`, phase === 'connect');
}

/** What a status mapping may add: the upstream's own error code, codes meaning "bad key", a redacted reason, Retry-After. */
export interface StatusContext {
  retryAfter?: string | undefined;
  /** An upstream error code that looks like a code (`RATE_LIMITED`), shown beside the status. */
  upstreamCode?: string | undefined;
  /** Upstream codes that mean the key was refused whatever the status says (Brave answers a bad key with 422). */
  credentialCodes?: readonly string[];
  /** A redacted upstream sentence explaining a 400/422 (image backends' validation errors). */
  detail?: string | undefined;
}

/**
 * The one mapping from an upstream's non-2xx status to the caller's error, worded by what it
 * means (`who` names the upstream: "openai upstream", "search provider (brave)"); 429 and 5xx may
 * be retried before the first byte. The upstream's body is never quoted beyond `detail`.
 */
export function statusError(who: string, status: number, context: StatusContext = {}): UpstreamError {
  const seconds = context.retryAfter !== undefined ? Number(context.retryAfter) : Number.NaN;
  const retryAfterMs = Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
  const label = `HTTP ${status}${context.upstreamCode ? ` ${context.upstreamCode}` : ''}`;
  let message: string;
  if (status >= 300 && status < 400) message = `The ${who} answered with a redirect (${label}), which is not followed; check its base_url.`;
  else if (
    status === 401 ||
    status === 403 ||
    (context.upstreamCode !== undefined && context.credentialCodes?.includes(context.upstreamCode))
  ) {
    message = `The ${who} refused the configured credentials (${label}).`;
  } else if (status === 429) message = `The ${who} is rate limiting this server (${label}); try again shortly.`;
  else if (status >= 500) message = `The ${who} failed (${label}).`;
  else if (status === 404) message = `The ${who} has no such endpoint or model (${label}).`;
  else message = `The ${who} rejected the request (${label})${context.detail ? `: ${context.detail}` : '.'}`;
  return new UpstreamError('upstream_error', message, `status_${status}`, RETRYABLE_STATUS.has(status), retryAfterMs);
}

/** The upstream could not be reached (refused, reset before answering, DNS). */
export function unreachableError(subject: string, cause: string): UpstreamError {
  return new UpstreamError('upstream_error', `The ${subject} upstream could not be reached.`, `connect_${cause}`, true);
}

/** The connection broke after the reply started. */
export function resetError(subject: string): UpstreamError {
  return new UpstreamError('upstream_error', `The ${subject} upstream connection broke in the middle of the reply.`, 'reset');
}

/** A frame that is not the dialect's format. */
export function malformedFrame(subject: string): UpstreamError {
  return new UpstreamError('upstream_error', `The ${subject} upstream sent a malformed frame.`, 'malformed');
}

/** The upstream reported an error inside a stream that had started. */
export function streamError(subject: string): UpstreamError {
  return new UpstreamError('upstream_error', `The ${subject} upstream reported an error in the middle of the reply.`, 'stream_error');
}

/** The stream ended before its terminal frame: a truncated reply, never a success. */
export function truncatedStream(subject: string): UpstreamError {
  return new UpstreamError('upstream_error', `The ${subject} upstream ended the reply before finishing it.`, 'truncated');
}

/** One frame (an SSE event, an NDJSON line, a JSON body) past `upstream_max_frame_bytes`. */
export function frameTooLarge(subject: string, maxBytes: number): UpstreamError {
  return new UpstreamError(
    'upstream_error',
    `The ${subject} upstream sent a frame larger than ${maxBytes} bytes; the reply was stopped.`,
    'frame_too_large',
  );
}
