/**
 * One JSON HTTP call to a configured upstream, shared by web search, image generation and
 * embeddings: the request's signal combined with a deadline that covers the body too, redirects
 * refused (only the configured host is ever contacted), the body read with a size cap, parsed as
 * JSON with a malformed flag, and every transport failure turned into an ApiError that names the
 * upstream but never its key or its own words. Mapping a non-2xx status or a wrong shape to an
 * error stays with each caller, because each one words that differently.
 */
import { ApiError } from '../errors.js';
import type { CallFailure, CallOutcome, UpstreamObserver } from './observer.js';
import type { CancelSignal } from '../domain/cancel.js';

export interface JsonCallRequest {
  /** Who is called, as the start of a sentence ("The search provider (brave)"); every transport error names it. */
  subject: string;
  url: URL | string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** The request's signal (client gone, server closing); its reason is what an abort rejects with. */
  signal?: CancelSignal;
  /** Deadline for the whole exchange, body included. */
  timeoutMs: number;
  /** Largest response body accepted; a larger one is refused instead of buffered. */
  maxBytes: number;
  /** Replaces the standard sentence for a missed deadline or an unreachable upstream. */
  wording?: { timeout?: string; unreachable?: string };
  /** The provider's name, the label of its metrics. */
  provider: string;
  /** Told once how the call went (the upstream layer's metrics and log); none of it reaches the client. */
  observer?: UpstreamObserver;
}

/** A completed exchange, whatever its status (a refused redirect comes back as its 3xx). */
export interface JsonReply {
  status: number;
  /** Parsed JSON, or undefined when the body was empty or not JSON. */
  json: unknown;
  /** True when the body was present but could not be parsed as JSON. */
  malformed: boolean;
}

/** Marks an abort caused by our own deadline, to tell it apart from the client leaving. */
class DeadlineReached extends Error {}

/** Performs the call and returns the reply; throws an ApiError for transport failures and the signal's reason on abort. */
export async function callJson(request: JsonCallRequest): Promise<JsonReply> {
  const { signal, observer } = request;
  signal?.throwIfAborted();
  const controller = new AbortController();
  const onClientAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', onClientAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new DeadlineReached()), request.timeoutMs);
  const started = performance.now();
  let outcome: CallOutcome = 'ok';
  let failure: CallFailure | undefined;
  try {
    const response = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      // A redirect could lead anywhere; the caller sees the 3xx and says it was not followed.
      redirect: 'manual',
      signal: controller.signal,
    });
    const text = await readCapped(response, request);
    let json: unknown;
    let malformed = false;
    if (text.trim() !== '') {
      try {
        json = JSON.parse(text);
      } catch {
        malformed = true;
      }
    }
    if (response.status < 200 || response.status >= 300) {
      outcome = 'error';
      failure = { code: 'upstream_error', reason: `status_${response.status}` };
    }
    return { status: response.status, json, malformed };
  } catch (error) {
    if (controller.signal.reason instanceof DeadlineReached) {
      outcome = 'timeout';
      failure = { code: 'upstream_timeout', reason: 'timeout' };
      throw new ApiError(
        'upstream_timeout',
        request.wording?.timeout ?? `${request.subject} did not answer within ${request.timeoutMs} ms.`,
      );
    }
    if (signal?.aborted) {
      outcome = 'aborted';
      throw signal.reason;
    }
    outcome = 'error';
    if (error instanceof ApiError) {
      failure = { code: error.code, reason: 'body' };
      throw error;
    }
    failure = { code: 'upstream_error', reason: `connect_${describeCause(error)}` };
    throw new ApiError('upstream_error', request.wording?.unreachable ?? `${request.subject} could not be reached.`);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onClientAbort);
    observer?.settled(request.provider, outcome, (performance.now() - started) / 1000, failure);
  }
}

/** Reads the whole body as text, refusing one over the cap (declared or counted) instead of buffering it. */
async function readCapped(response: Response, request: JsonCallRequest): Promise<string> {
  const tooLarge = () => new ApiError('upstream_error', `${request.subject} sent a response larger than ${request.maxBytes} bytes.`);
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > request.maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > request.maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

/** A loggable cause for a failed fetch: the socket error code when there is one, never the message. */
function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return error instanceof Error ? error.name : 'unknown';
}
