/**
 * One streamed HTTP call to an upstream model server, with the robustness rules every dialect
 * shares: a connect timeout, a first-byte timeout, an idle timeout between chunks, retries with
 * backoff only before the first body byte, upstream statuses mapped to safe ApiErrors, and the
 * socket closed at once when the caller aborts or stops reading.
 *
 * node:http is used rather than global fetch because fetch cannot tell "connecting" from
 * "waiting for the model" without the undici package, and these are two different timeouts.
 */
import http from 'node:http';
import https from 'node:https';
import { ApiError } from '../errors.js';
import { abortableSleep, abortReason } from './abortable-sleep.js';

/** The `upstream` config block: how long to wait, and how often to retry. */
export interface UpstreamTimeouts {
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  retries: number;
}

/** One upstream request: where, with which headers, and the JSON body. */
export interface UpstreamCall {
  /** Provider name, used in messages (never the URL's credentials or any key). */
  provider: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

/** Why a call failed, for metrics: `timeout`, `status_<n>`, `reset`, `connect`. */
export class UpstreamFailure extends ApiError {
  constructor(
    code: 'upstream_error' | 'upstream_timeout',
    message: string,
    readonly reason: string,
    readonly retryable: boolean,
    readonly retryAfterMs: number | undefined = undefined,
  ) {
    super(code, message);
  }
}

const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 2000;

type TimerKind = 'connect' | 'first_byte' | 'idle';

/** An open response body plus the means to close its socket. */
interface OpenResponse {
  response: http.IncomingMessage;
  request: http.ClientRequest;
  /** Fires the named timer's failure (destroys the socket); rearm with `arm`. */
  arm(kind: TimerKind, ms: number): void;
  disarm(): void;
  /** The timer that destroyed the socket, if any. */
  expired(): TimerKind | undefined;
}

function timeoutFailure(provider: string, kind: TimerKind): UpstreamFailure {
  const what =
    kind === 'connect'
      ? 'could not be reached in time'
      : kind === 'first_byte'
        ? 'did not start answering in time'
        : 'stopped sending in the middle of the reply';
  return new UpstreamFailure('upstream_timeout', `The ${provider} upstream ${what}.`, `timeout_${kind}`, kind === 'connect');
}

function statusFailure(provider: string, status: number, retryAfter: string | undefined): UpstreamFailure {
  const retryAfterSeconds = retryAfter !== undefined ? Number(retryAfter) : Number.NaN;
  const retryAfterMs = Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0 ? retryAfterSeconds * 1000 : undefined;
  let message: string;
  if (status === 429) message = `The ${provider} upstream is rate limiting requests (HTTP 429); try again shortly.`;
  else if (status === 401 || status === 403) message = `The ${provider} upstream refused the configured credentials (HTTP ${status}).`;
  else if (status >= 500) message = `The ${provider} upstream failed (HTTP ${status}).`;
  else message = `The ${provider} upstream rejected the request (HTTP ${status}).`;
  return new UpstreamFailure('upstream_error', message, `status_${status}`, RETRYABLE_STATUS.has(status), retryAfterMs);
}

/** Sends one attempt and resolves once a 2xx status line arrived (body not read yet). */
function open(call: UpstreamCall, timeouts: UpstreamTimeouts, signal: AbortSignal): Promise<OpenResponse> {
  return new Promise<OpenResponse>((resolve, reject) => {
    const url = new URL(call.url);
    const payload = JSON.stringify(call.body);
    const transport = url.protocol === 'https:' ? https : http;
    let timer: NodeJS.Timeout | undefined;
    let expiredKind: TimerKind | undefined;
    let settled = false;

    const request = transport.request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(payload)),
        ...call.headers,
      },
    });
    const disarm = (): void => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    };
    const arm = (kind: TimerKind, ms: number): void => {
      disarm();
      timer = setTimeout(() => {
        expiredKind = kind;
        request.destroy(timeoutFailure(call.provider, kind));
      }, ms);
    };
    const fail = (error: unknown): void => {
      disarm();
      signal.removeEventListener('abort', onAbort);
      if (settled) return;
      settled = true;
      reject(error);
    };
    const onAbort = (): void => {
      request.destroy();
      fail(abortReason(signal));
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });

    arm('connect', timeouts.connectTimeoutMs);
    request.on('socket', (socket) => {
      const connected = (): void => arm('first_byte', timeouts.firstByteTimeoutMs);
      // A kept-alive socket is already connected; a fresh one reports connect (or TLS) later.
      const pending = (socket as { connecting?: boolean; pending?: boolean }).connecting;
      if (!pending) connected();
      else socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', connected);
    });
    request.on('error', (error) => {
      if (expiredKind) {
        fail(timeoutFailure(call.provider, expiredKind));
        return;
      }
      if (signal.aborted) {
        fail(abortReason(signal));
        return;
      }
      const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
      fail(new UpstreamFailure('upstream_error', `The ${call.provider} upstream could not be reached.`, `connect_${code}`, true));
    });
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        const retryAfter = response.headers['retry-after'];
        // The error body is never shown to clients (it may echo the key), so it is not read at all:
        // the connection is dropped rather than drained, which also bounds what we accept.
        fail(statusFailure(call.provider, status, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter));
        response.on('error', () => undefined);
        request.destroy();
        return;
      }
      settled = true;
      signal.removeEventListener('abort', onAbort);
      // Read errors surface through the body iterator; this keeps a late one (after the consumer
      // stopped reading) from becoming an uncaught exception.
      response.on('error', () => undefined);
      resolve({ response, request, arm, disarm, expired: () => expiredKind });
    });
    request.end(payload);
  });
}

/** How long the rest of a finished reply may take to arrive before its socket is dropped instead. */
const DRAIN_AFTER_STOP_MS = 1000;

/**
 * Streams the decoded text of an upstream response body, chunk by chunk as it arrives.
 * Breaking out of the loop (or aborting `signal`) destroys the socket immediately.
 */
export async function* streamUpstream(call: UpstreamCall, timeouts: UpstreamTimeouts, signal: AbortSignal): AsyncGenerator<string> {
  let opened: OpenResponse | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      opened = await open(call, timeouts, signal);
      break;
    } catch (error) {
      if (!(error instanceof UpstreamFailure) || !error.retryable || attempt >= timeouts.retries || signal.aborted) throw error;
      const backoff = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
      await abortableSleep(Math.min(BACKOFF_CAP_MS, Math.max(backoff, error.retryAfterMs ?? 0)), signal);
    }
  }

  const { response, request } = opened;
  const decoder = new TextDecoder('utf-8');
  const onAbort = (): void => {
    request.destroy();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) onAbort();
  try {
    // The first-byte timer armed at connect keeps running until a body byte shows up. The iterator
    // must not destroy the response when the provider stops at its terminal frame (`[DONE]`,
    // `message_stop`) before the body's last chunk: that would throw away a keep-alive socket.
    for await (const chunk of response.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      // Time the consumer spends (a slow client) is not upstream silence: the idle clock only
      // runs while we are waiting for the upstream.
      opened.disarm();
      const text = decoder.decode(chunk, { stream: true });
      if (text.length > 0) yield text;
      opened.arm('idle', timeouts.idleTimeoutMs);
    }
    const rest = decoder.decode();
    if (rest.length > 0) yield rest;
  } catch (error) {
    if (signal.aborted) throw abortReason(signal);
    const expired = opened.expired();
    if (expired) throw timeoutFailure(call.provider, expired);
    throw new UpstreamFailure('upstream_error', `The ${call.provider} upstream connection broke in the middle of the reply.`, 'reset', false);
  } finally {
    opened.disarm();
    signal.removeEventListener('abort', onAbort);
    if (!response.complete) {
      if (signal.aborted) {
        // The client left: end the upstream request at once.
        request.destroy();
      } else {
        // Stopped at the terminal frame (or on a bad frame): read what is left so the socket can
        // go back to the keep-alive pool, but never wait on an upstream that stalls after it.
        const drainLimit = setTimeout(() => request.destroy(), DRAIN_AFTER_STOP_MS);
        drainLimit.unref();
        response.once('end', () => clearTimeout(drainLimit));
        response.once('close', () => clearTimeout(drainLimit));
        response.resume();
      }
    }
  }
}

/** Turns a failure while reading a stream into a safe, client-visible ApiError. */
export function malformedFrame(provider: string): UpstreamFailure {
  return new UpstreamFailure('upstream_error', `The ${provider} upstream sent a malformed frame.`, 'malformed', false);
}

/** The upstream stream ended before its terminal frame: a truncated reply, never a success. */
export function truncatedStream(provider: string): UpstreamFailure {
  return new UpstreamFailure('upstream_error', `The ${provider} upstream ended the reply before finishing it.`, 'truncated', false);
}
