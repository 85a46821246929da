/**
 * One JSON call to an image upstream: the shared JSON transport (deadline, size cap, no redirects)
 * plus the image wording. What reaches the client says what went wrong (status class, timeout)
 * without upstream internals (stack traces from a Python server) or anything that could carry a
 * credential; only a 400/422 reason is passed on, redacted.
 */
import { ApiError } from '../errors.js';
import { callJson, type JsonReply } from '../upstream/json-call.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import { statusError } from '../upstream/upstream-error.js';
import type { CancelSignal } from '../domain/cancel.js';

export interface UpstreamJsonCall {
  /** Provider name for messages. */
  label: string;
  method: 'GET' | 'POST';
  url: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** The request's signal (client gone, server closing). */
  signal: CancelSignal;
  /** Deadline for the whole exchange, body included. */
  timeoutMs: number;
  /** The upstream layer's metrics and log seam, and the provider name its metrics use. */
  observer?: UpstreamObserver | undefined;
  provider?: string;
  /** Largest response body accepted; base64 images are big, but not unbounded. */
  maxBytes?: number;
}

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
const MAX_DETAIL_CHARS = 300;

/**
 * Removes anything that looks like a credential (bearer tokens, `sk-…` keys, long opaque strings)
 * from an upstream sentence before it is shown to a client.
 */
function redactSecrets(text: string): string {
  return text
    .replace(/\b(bearer|basic)\s+\S+/gi, '$1 [redacted]')
    .replace(/\b(sk|pk|rk|key|api|tok)[-_][A-Za-z0-9_*.-]{6,}/gi, '[redacted]')
    .replace(/[A-Za-z0-9_+/=*.-]{32,}/g, '[redacted]');
}

/** The human sentence an upstream put in its error body (OpenAI `error.message`, A1111 `detail`/`error`), if any. */
function upstreamSentence(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const record = body as Record<string, unknown>;
  const error = record.error;
  if (error && typeof error === 'object' && typeof (error as Record<string, unknown>).message === 'string') {
    return (error as Record<string, unknown>).message as string;
  }
  if (typeof record.detail === 'string' && record.detail !== '') return record.detail;
  if (Array.isArray(record.detail)) {
    // FastAPI validation errors: [{loc: [...], msg: "..."}]
    const messages = record.detail
      .map((item) => (item && typeof item === 'object' ? (item as Record<string, unknown>).msg : undefined))
      .filter((message): message is string => typeof message === 'string');
    if (messages.length > 0) return messages.join('; ');
  }
  if (typeof record.message === 'string') return record.message;
  return undefined;
}

/** Sends one request and returns the parsed JSON body of a 2xx reply; every failure is an ApiError. */
export async function callUpstreamJson(call: UpstreamJsonCall): Promise<unknown> {
  const subject = `The image provider (${call.label})`;
  let reply: JsonReply;
  try {
    reply = await callJson({
      subject,
      provider: call.provider ?? call.label,
      ...(call.observer ? { observer: call.observer } : {}),
      url: call.url,
      method: call.method,
      headers: { accept: 'application/json', ...(call.body === undefined ? {} : { 'content-type': 'application/json' }), ...call.headers },
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      signal: call.signal,
      timeoutMs: call.timeoutMs,
      maxBytes: call.maxBytes ?? DEFAULT_MAX_BYTES,
      wording: { timeout: `${subject} did not answer within ${Math.ceil(call.timeoutMs / 1000)} s.` },
    });
  } catch (error) {
    // Images answer a cancelled request the way the built-in renderer does.
    if (call.signal.aborted) throw new ApiError('unavailable', 'The image request was cancelled.');
    throw error;
  }
  if (reply.status < 200 || reply.status >= 300) {
    // Only a 400/422 reason is passed on, redacted: it tells the caller what to change in the prompt.
    const sentence = reply.status === 400 || reply.status === 422 ? upstreamSentence(reply.json) : undefined;
    throw statusError(`image provider (${call.label})`, reply.status, {
      detail: sentence && redactSecrets(sentence).slice(0, MAX_DETAIL_CHARS),
    });
  }
  if (reply.json === undefined) throw new ApiError('upstream_error', `${subject} sent a reply that is not JSON.`);
  return reply.json;
}
