/**
 * The one streamed HTTP client for upstream model servers, on undici: pooled keep-alive
 * connections with no cap per origin (10k concurrent streams to one upstream must not queue),
 * connect / first-byte / idle timeouts, retries with backoff only before the first body byte,
 * redirects never followed, error bodies never read, the socket closed at once when the caller
 * aborts, and a socket kept for reuse when a reply stops at its terminal frame. Every call is
 * reported once to the observer (duration, outcome, failure code) for metrics and logs.
 *
 * The reply is read with undici's dispatch API and a handler of our own (UpstreamStream) that is
 * also the async iterator the caller reads, or (`pull`) the body that hands each read to the frame
 * loop's callbacks: chunks go from the socket parser into a small queue or straight to the one
 * waiting read, with no Readable stream, body mixin or AbortSignal plumbing per call in between. A
 * read takes everything queued at once. What a stream whose consumer stopped reading holds is
 * bounded by the queue's mark and the socket's small reads (connector.ts), counted in
 * test/upstream-stall-memory.test.ts.
 */
import { Agent, type Dispatcher } from 'undici';
import { abortableSleep, abortReason } from './abortable-sleep.js';
import { upstreamConnector } from './connector.js';
import type { CallbackBody } from './frames.js';
import type { CallOutcome, UpstreamObserver } from './observer.js';
import { resetError, statusError, timeoutError, unreachableError, UpstreamError, type TimeoutPhase } from './upstream-error.js';
import type { CancelSignal } from '../domain/cancel.js';

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
/**
 * Body bytes queued ahead of a slow consumer before the reply is paused: a stalled stream holds
 * few raw bytes (this, and the small socket reads of connector.ts the pause leaves unparsed).
 */
const BODY_HIGH_WATER_MARK = 4 * 1024;
/** Parsed request targets kept per client (one per configured upstream URL in practice). */
const TARGET_CACHE_SIZE = 64;

/** Why we dropped a socket ourselves; handed to undici's abort, never to a caller. */
const DROPPED = new Error('upstream socket dropped');
const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/** An errno-like code for an error that kept a request from being answered; never its message. */
function causeCode(error: unknown): string {
  const own = (error as { code?: unknown }).code;
  const cause = (error as { cause?: { code?: unknown } }).cause?.code;
  const code = typeof cause === 'string' ? cause : typeof own === 'string' ? own : undefined;
  return code ?? (error instanceof Error ? error.name : 'unknown');
}

/** Where a request goes, split the way undici's dispatch takes it. */
interface Target {
  origin: string;
  path: string;
}

/** What one call needs from its client. */
interface CallContext {
  readonly agent: Agent;
  readonly settings: UpstreamSettings;
  readonly observer?: UpstreamObserver | undefined;
  target(url: string): Target;
}

type ReadResult = IteratorResult<Uint8Array, undefined>;

/** Streams upstream replies through one shared connection pool. */
export class UpstreamClient implements CallContext {
  readonly agent: Agent;
  private readonly targets = new Map<string, Target>();

  constructor(
    readonly settings: UpstreamSettings,
    readonly observer?: UpstreamObserver,
  ) {
    this.agent = new Agent({
      connect: upstreamConnector(settings.connectTimeoutMs),
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
   * Read it with `for await` or `pull` (one read at a time); nothing is sent before the first read.
   */
  stream(call: StreamCall, signal: CancelSignal): AsyncGenerator<Uint8Array> & CallbackBody {
    return new UpstreamStream(this, call, signal);
  }

  /** The origin and path of a URL, parsed once per distinct URL. */
  target(url: string): Target {
    let target = this.targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
      if (this.targets.size >= TARGET_CACHE_SIZE) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  /** Closes every pooled connection (server shutdown). */
  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

/** The body clock fired: fails the read that waits on the upstream (a stale fire, with no read waiting, is ignored). */
function clockExpired(stream: UpstreamStream): void {
  stream.clockExpired();
}

/** The rest of a finished reply did not arrive in time: drop its socket. */
function drainExpired(stream: UpstreamStream): void {
  stream.dropDrain();
}

/**
 * One streamed call: the dispatch handler of its current attempt and the async iterator its
 * caller reads. Attempts run one after another (retries before the first body byte), so the
 * handler's controller always belongs to the live attempt; a controller we let go of (a refused
 * status, an abort) is detached before it is aborted, so the error it reports is ignored.
 */
class UpstreamStream implements AsyncGenerator<Uint8Array, undefined>, CallbackBody, Dispatcher.DispatchHandler {
  private state: 'idle' | 'opening' | 'open' | 'closed' = 'idle';
  private started = 0;
  /** The live attempt's controller, once undici started it on a socket. */
  private controller: Dispatcher.DispatchController | undefined;
  /** The live attempt's wait for a status line; cleared once it is decided. */
  private headResolve: (() => void) | undefined;
  private headReject: ((error: unknown) => void) | undefined;
  /** Chunks that arrived while no read was waiting. */
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  /** Why the body broke while no read was waiting; thrown once the queue is read. */
  private failure: unknown;
  /** The one read waiting for the upstream. */
  private readResolve: ((result: ReadResult) => void) | undefined;
  private readReject: ((error: unknown) => void) | undefined;
  /** The body clock: first-byte until a chunk was handed out, then idle; it runs only while a read waits. */
  private timer: NodeJS.Timeout | undefined;
  private timerPhase: TimeoutPhase = 'first_byte';
  private expired: TimeoutPhase | undefined;
  private received = false;
  /** After the caller stopped early: the rest of the body is read and dropped so the socket can be reused. */
  private draining = false;
  private drained = 0;
  private drainTimer: NodeJS.Timeout | undefined;
  private resuming = false;

  constructor(
    private readonly client: CallContext,
    private readonly call: StreamCall,
    private readonly signal: CancelSignal,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<ReadResult> {
    if (this.state === 'open') return this.read();
    if (this.state === 'idle') return this.begin();
    if (this.state === 'closed') return Promise.resolve(DONE);
    return Promise.reject(new Error('UpstreamStream is read one chunk at a time'));
  }

  /** The caller stopped reading: keep the socket if the reply can finish on its own, else drop it. */
  return(): Promise<ReadResult> {
    if (this.state === 'idle') this.state = 'closed';
    if (this.state === 'closed') return Promise.resolve(DONE);
    const controller = this.controller;
    this.controller = undefined;
    if (controller !== undefined && !this.ended) {
      if (this.signal.aborted || this.state === 'opening') controller.abort(DROPPED);
      else this.drain(controller);
    }
    this.headResolve = undefined;
    this.headReject = undefined;
    const resolve = this.readResolve;
    this.readResolve = undefined;
    this.readReject = undefined;
    this.settle(undefined);
    resolve?.(DONE);
    return Promise.resolve(DONE);
  }

  throw(error: unknown): Promise<ReadResult> {
    return this.return().then(() => Promise.reject(error));
  }

  private async begin(): Promise<ReadResult> {
    this.state = 'opening';
    this.started = performance.now();
    try {
      this.signal.throwIfAborted();
      this.signal.addEventListener('abort', this);
      await this.open();
    } catch (error) {
      throw this.settle(error);
    }
    return this.next();
  }

  /** Sends the request, retrying connect failures, 429 and 5xx with backoff; resolves on a 2xx status line. */
  private async open(): Promise<void> {
    const payload = JSON.stringify(this.call.body);
    const { retries } = this.client.settings;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(payload);
      } catch (error) {
        if (!(error instanceof UpstreamError) || !error.retryable || attempt >= retries || this.signal.aborted) throw error;
        const backoff = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
        await abortableSleep(Math.min(BACKOFF_CAP_MS, Math.max(backoff, error.retryAfterMs ?? 0)), this.signal);
      }
    }
  }

  private attempt(payload: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let target: Target;
      try {
        target = this.client.target(this.call.url);
      } catch (error) {
        reject(unreachableError(this.call.subject, causeCode(error)));
        return;
      }
      // Set before dispatching: a free pooled socket may start the request synchronously.
      this.headResolve = resolve;
      this.headReject = reject;
      this.client.agent.dispatch(
        {
          origin: target.origin,
          path: target.path,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...this.call.headers },
          body: payload,
        },
        this,
      );
    });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // An attempt nobody waits for any more (the caller aborted while it queued for a socket).
    if (this.headReject === undefined) controller.abort(DROPPED);
    else this.controller = controller;
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (controller !== this.controller || statusCode < 200) return;
    const resolve = this.headResolve;
    const reject = this.headReject;
    this.headResolve = undefined;
    this.headReject = undefined;
    if (statusCode >= 300) {
      const retryAfter = headers['retry-after'];
      // The error body is never shown (it may echo the key), so it is not read: the socket is dropped.
      this.controller = undefined;
      controller.abort(DROPPED);
      reject?.(
        statusError(`${this.call.subject} upstream`, statusCode, { retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter }),
      );
      return;
    }
    this.state = 'open';
    // undici's controller keeps the raw header lines, views into the read the head arrived in, for
    // the whole reply; they are parsed into `headers` already.
    (controller as { rawHeaders?: unknown }).rawHeaders = null;
    resolve?.();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.draining) {
      this.drained += chunk.byteLength;
      if (this.drained > DRAIN_LIMIT_BYTES) this.dropDrain();
      return;
    }
    if (controller !== this.controller) return;
    const resolve = this.readResolve;
    if (resolve !== undefined) {
      this.readResolve = undefined;
      this.readReject = undefined;
      this.received = true;
      resolve({ value: chunk, done: false });
      return;
    }
    this.queue.push(chunk);
    this.queued += chunk.byteLength;
    // The consumer is behind: undici stops parsing, and the socket reading, until the queue was read.
    if (this.queued > BODY_HIGH_WATER_MARK && !this.resuming) controller.pause();
  }

  /**
   * The queue was read: parsing goes on. undici parses what the socket buffered inside
   * `resume()`, and all of it is taken, past the mark if need be. Were it paused midway, the
   * unparsed rest would stay in the socket and each resume would add one more read to it while a
   * mark's worth is taken out: behind a slow reader, the rest would grow with every round.
   */
  private resume(controller: Dispatcher.DispatchController): void {
    this.resuming = true;
    try {
      controller.resume();
    } finally {
      this.resuming = false;
    }
    if (this.queued > BODY_HIGH_WATER_MARK && controller === this.controller) controller.pause();
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    if (this.draining) {
      // The rest arrived: the socket goes back to the pool.
      this.stopDrain();
      return;
    }
    if (controller !== this.controller) return;
    this.controller = undefined;
    this.ended = true;
    const resolve = this.readResolve;
    if (resolve === undefined) return;
    this.readResolve = undefined;
    this.readReject = undefined;
    this.settle(undefined);
    resolve(DONE);
  }

  onResponseError(controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.draining) {
      this.stopDrain();
      return;
    }
    // undici reports errors from before a socket was assigned (connect failures) without a controller.
    if (controller !== this.controller) return;
    this.controller = undefined;
    const reject = this.headReject;
    if (reject !== undefined) {
      this.headResolve = undefined;
      this.headReject = undefined;
      reject(this.refusal(error));
      return;
    }
    if (this.state === 'open') this.broke(error);
  }

  /** The caller's signal fired: the socket is destroyed at once and the waiting read (or open) fails. */
  handleEvent(): void {
    const reason = abortReason(this.signal);
    const controller = this.controller;
    this.controller = undefined;
    controller?.abort(reason instanceof Error ? reason : DROPPED);
    const reject = this.headReject;
    if (reject !== undefined) {
      this.headResolve = undefined;
      this.headReject = undefined;
      reject(reason);
    }
    if (this.state === 'open' && !this.ended) this.broke(reason);
  }

  /** Why an attempt got no status line, as the error the retry loop judges. */
  private refusal(error: Error): unknown {
    if (this.signal.aborted) return abortReason(this.signal);
    const code = causeCode(error);
    if (code === 'UND_ERR_CONNECT_TIMEOUT') return timeoutError(this.call.subject, 'connect');
    if (code === 'UND_ERR_HEADERS_TIMEOUT') return timeoutError(this.call.subject, 'first_byte');
    return unreachableError(this.call.subject, code);
  }

  private read(): Promise<ReadResult> {
    let result: ReadResult | undefined;
    try {
      result = this.ready();
    } catch (error) {
      return Promise.reject(error);
    }
    if (result !== undefined) return Promise.resolve(result);
    this.armClock();
    return new Promise<ReadResult>((resolve, reject) => {
      this.readResolve = resolve;
      this.readReject = reject;
    });
  }

  /**
   * The next read, for a reader that takes callbacks (frames.ts): the result at once when a chunk is
   * queued or the body ended, else undefined and `onRead` or `onError` is called when it comes, with
   * no promise in between. Throws the failure that ended the body. The first read, which sends the
   * request, still goes through next().
   */
  pull(onRead: (result: ReadResult) => void, onError: (error: unknown) => void): ReadResult | undefined {
    if (this.state !== 'open') {
      this.next().then(onRead, onError);
      return undefined;
    }
    const result = this.ready();
    if (result !== undefined) return result;
    this.armClock();
    this.readResolve = onRead;
    this.readReject = onError;
    return undefined;
  }

  /** What a read returns at once: everything queued, or the end; undefined when it must wait. Throws the body's failure. */
  private ready(): ReadResult | undefined {
    if (this.queued > 0) {
      // Everything queued goes out as one chunk: one copy, and one pass of the consumer's loop.
      const [first] = this.queue;
      const chunk = first !== undefined && this.queue.length === 1 ? first : Buffer.concat(this.queue, this.queued);
      this.queue.length = 0;
      this.queued = 0;
      this.received = true;
      const controller = this.controller;
      // Resuming may parse what the socket holds at once, refilling the queue before this returns.
      if (controller?.paused) this.resume(controller);
      return { value: chunk, done: false };
    }
    if (this.failure !== undefined) throw this.settle(this.failure);
    if (this.ended) {
      this.settle(undefined);
      return DONE;
    }
    return undefined;
  }

  /** The body broke after the reply started: the waiting read fails now, else the next read once the queue is empty. */
  private broke(error: unknown): void {
    this.controller = undefined;
    let failure: unknown;
    if (this.expired !== undefined) failure = timeoutError(this.call.subject, this.expired);
    else if (this.signal.aborted) failure = abortReason(this.signal);
    else failure = error instanceof UpstreamError ? error : resetError(this.call.subject);
    if (this.signal.aborted) {
      this.queue.length = 0;
      this.queued = 0;
    }
    const reject = this.readReject;
    if (reject === undefined) {
      this.failure = failure;
      return;
    }
    this.readResolve = undefined;
    this.readReject = undefined;
    reject(this.settle(failure));
  }

  private armClock(): void {
    const phase: TimeoutPhase = this.received ? 'idle' : 'first_byte';
    if (this.timer !== undefined && this.timerPhase === phase) {
      this.timer.refresh();
      return;
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerPhase = phase;
    const { firstByteTimeoutMs, idleTimeoutMs } = this.client.settings;
    this.timer = setTimeout(clockExpired, phase === 'first_byte' ? firstByteTimeoutMs : idleTimeoutMs, this);
  }

  /** Called by the body clock. */
  clockExpired(): void {
    if (this.readReject === undefined || this.state !== 'open') return;
    this.expired = this.timerPhase;
    const controller = this.controller;
    this.controller = undefined;
    controller?.abort(DROPPED);
    this.broke(undefined);
  }

  /** Reads the rest of a reply so its socket can be reused; drops the socket if it is long or slow. */
  private drain(controller: Dispatcher.DispatchController): void {
    this.draining = true;
    this.drained = this.queued;
    this.queue.length = 0;
    this.queued = 0;
    this.controller = controller;
    this.drainTimer = setTimeout(drainExpired, DRAIN_AFTER_STOP_MS, this);
    this.drainTimer.unref();
    if (this.drained > DRAIN_LIMIT_BYTES) this.dropDrain();
    else if (controller.paused) controller.resume();
  }

  /** Called when the drain takes too long or reads too much. */
  dropDrain(): void {
    const controller = this.controller;
    this.stopDrain();
    controller?.abort(DROPPED);
  }

  private stopDrain(): void {
    this.draining = false;
    this.controller = undefined;
    if (this.drainTimer !== undefined) clearTimeout(this.drainTimer);
    this.drainTimer = undefined;
  }

  /** Ends the call once: clocks and listener gone, the observer told. Returns what the caller is to be thrown. */
  private settle(error: unknown): unknown {
    const first = this.state !== 'closed';
    this.state = 'closed';
    this.signal.removeEventListener('abort', this);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.queued = 0;
    let outcome: CallOutcome = 'ok';
    let failure: UpstreamError | undefined;
    let thrown: unknown;
    if (error !== undefined) {
      if (this.signal.aborted) {
        outcome = 'aborted';
        thrown = abortReason(this.signal);
      } else {
        failure = error instanceof UpstreamError ? error : resetError(this.call.subject);
        outcome = failure.code === 'upstream_timeout' ? 'timeout' : 'error';
        thrown = failure;
      }
    }
    if (!first) return thrown;
    this.client.observer?.settled(
      this.call.subject,
      outcome,
      (performance.now() - this.started) / 1000,
      failure && { code: failure.code, reason: failure.reason },
    );
    return thrown;
  }
}
