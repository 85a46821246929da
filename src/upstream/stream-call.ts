/**
 * The one streamed HTTP client for upstream model servers, on undici: pooled keep-alive
 * connections with no cap per origin (10k concurrent streams to one upstream must not queue),
 * connect / first-byte / idle timeouts, retries with backoff only before the first body byte,
 * redirects never followed, error bodies never read, the socket closed at once when the caller
 * aborts, and a socket kept for reuse when a reply stops at its terminal frame. Every call is
 * reported once to the observer (duration, outcome, failure code) for metrics and logs.
 */
import { Agent, request, type Dispatcher } from 'undici';
import { abortableSleep, abortReason } from './abortable-sleep.js';
import type { CallOutcome, UpstreamObserver } from './observer.js';
import { resetError, statusError, timeoutError, unreachableError, UpstreamError, type TimeoutPhase } from './upstream-error.js';

/** The `upstream` config block plus the frame bound. */
export interface UpstreamSettings {
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  retries: number;
  /** Largest single frame (SSE event, NDJSON line, JSON body) accepted from an upstream. */
  maxFrameBytes: number;
}

/** One streamed upstream request: who (for messages and metrics), where, headers, the JSON body. */
export interface StreamCall {
  subject: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 2000;
/** How long the rest of a finished reply may take to arrive before its socket is dropped instead. */
const DRAIN_AFTER_STOP_MS = 1000;
const DRAIN_LIMIT_BYTES = 256 * 1024;
/** Body bytes buffered ahead of a slow consumer: a stalled stream holds raw bytes, and few of them. */
const BODY_HIGH_WATER_MARK = 16 * 1024;

/**
 * The one body timer of a reply: the first-byte clock until the first body byte, then the idle
 * clock while we wait for the next one. Expiry destroys the body, which closes its socket.
 * Connect and response headers are timed by the pool itself (connect timeout, headersTimeout).
 */
class BodyClock {
  private timer: NodeJS.Timeout | undefined;
  /** The phase whose timer fired, if one did. */
  expired: TimeoutPhase | undefined;

  constructor(private readonly body: Dispatcher.ResponseData['body']) {}

  /** Starts the timer for a phase, replacing the previous one. */
  arm(phase: TimeoutPhase, ms: number): void {
    this.disarm();
    this.timer = setTimeout(() => {
      this.expired = phase;
      this.body.destroy();
    }, ms);
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** An errno-like code for an error that kept a request from being answered; never its message. */
function causeCode(error: unknown): string {
  const own = (error as { code?: unknown }).code;
  const cause = (error as { cause?: { code?: unknown } }).cause?.code;
  const code = typeof cause === 'string' ? cause : typeof own === 'string' ? own : undefined;
  return code ?? (error instanceof Error ? error.name : 'unknown');
}

/** Reads the rest of a reply so its socket can be reused; drops the socket if it is long or slow. */
function drainForReuse(body: Dispatcher.ResponseData['body']): void {
  const limit = setTimeout(() => body.destroy(), DRAIN_AFTER_STOP_MS);
  limit.unref();
  body
    .dump({ limit: DRAIN_LIMIT_BYTES })
    .catch(() => undefined)
    .finally(() => clearTimeout(limit));
}

const ignore = (): void => undefined;

/** Streams upstream replies through one shared connection pool. */
export class UpstreamClient {
  private readonly agent: Agent;

  constructor(
    readonly settings: UpstreamSettings,
    private readonly observer?: UpstreamObserver,
  ) {
    this.agent = new Agent({
      connect: { timeout: settings.connectTimeoutMs },
      headersTimeout: settings.firstByteTimeoutMs,
      // The idle clock is ours: it only runs while we wait on the upstream, never on a slow client.
      bodyTimeout: 0,
      keepAliveTimeout: 10_000,
      pipelining: 1,
    });
  }

  /**
   * The raw body of a 2xx reply, chunk by chunk as it arrives. Breaking out of the loop keeps the
   * socket for reuse (the rest is drained, bounded); aborting `signal` destroys it at once.
   */
  async *stream(call: StreamCall, signal: AbortSignal): AsyncGenerator<Uint8Array> {
    const started = performance.now();
    let outcome: CallOutcome = 'ok';
    let failure: UpstreamError | undefined;
    let clock: BodyClock | undefined;
    try {
      const { body } = await this.open(call, signal);
      clock = new BodyClock(body);
      // The first-byte clock runs until a body byte shows up.
      clock.arm('first_byte', this.settings.firstByteTimeoutMs);
      let complete = false;
      try {
        for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>) {
          clock.disarm();
          yield chunk;
          clock.arm('idle', this.settings.idleTimeoutMs);
        }
        complete = true;
      } catch (error) {
        if (clock.expired) throw timeoutError(call.subject, clock.expired);
        if (signal.aborted) throw abortReason(signal);
        throw error instanceof UpstreamError ? error : resetError(call.subject);
      } finally {
        clock.disarm();
        if (!complete && !body.destroyed) {
          if (signal.aborted || clock.expired) body.destroy();
          // Stopped at the terminal frame (or on a bad frame): read what is left so the socket can
          // go back to the pool, but never wait on an upstream that stalls after it.
          else drainForReuse(body);
        }
      }
    } catch (error) {
      if (signal.aborted) {
        outcome = 'aborted';
        throw abortReason(signal);
      }
      failure = error instanceof UpstreamError ? error : resetError(call.subject);
      outcome = failure.code === 'upstream_timeout' ? 'timeout' : 'error';
      throw failure;
    } finally {
      clock?.disarm();
      this.observer?.settled(
        call.subject,
        outcome,
        (performance.now() - started) / 1000,
        failure && { code: failure.code, reason: failure.reason },
      );
    }
  }

  /** Sends the request, retrying connect failures, 429 and 5xx with backoff; resolves on a 2xx status line. */
  private async open(call: StreamCall, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    const payload = JSON.stringify(call.body);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(call, payload, signal);
      } catch (error) {
        if (!(error instanceof UpstreamError) || !error.retryable || attempt >= this.settings.retries || signal.aborted) throw error;
        const backoff = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
        await abortableSleep(Math.min(BACKOFF_CAP_MS, Math.max(backoff, error.retryAfterMs ?? 0)), signal);
      }
    }
  }

  private async attempt(call: StreamCall, payload: string, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    let reply: Dispatcher.ResponseData;
    try {
      reply = await request(call.url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...call.headers },
        body: payload,
        signal,
        highWaterMark: BODY_HIGH_WATER_MARK,
      });
    } catch (error) {
      if (signal.aborted) throw abortReason(signal);
      const code = causeCode(error);
      if (code === 'UND_ERR_CONNECT_TIMEOUT') throw timeoutError(call.subject, 'connect');
      if (code === 'UND_ERR_HEADERS_TIMEOUT') throw timeoutError(call.subject, 'first_byte');
      throw unreachableError(call.subject, code);
    }
    // undici turns a destroy without an error into an 'error' event; a late one must not go uncaught.
    reply.body.on('error', ignore);
    if (reply.statusCode < 200 || reply.statusCode >= 300) {
      const retryAfter = reply.headers['retry-after'];
      // The error body is never shown (it may echo the key), so it is not read: the socket is dropped.
      reply.body.destroy();
      throw statusError(`${call.subject} upstream`, reply.statusCode, {
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
      });
    }
    return reply;
  }

  /** Closes every pooled connection (server shutdown). */
  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}
