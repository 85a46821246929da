/**
 * The uWS application: one catch-all handler that snapshots the request, registers onAborted
 * first, routes, and turns anything thrown into the contract's JSON error. The only place (with
 * body.ts and stream.ts) that touches the binding.
 */
import { randomBytes } from 'node:crypto';
import uWS from '@trufflesuite/uws-js-unofficial';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import { ApiError, ClientGone, ServerShutdown, STATUS_TEXT, toApiError } from '../errors.js';
import { clientAddressFrom, type TrustProxy } from './client-address.js';
import { allowedOrigin, corsHeaders, preflightHeaders, type CorsPolicy } from './cors.js';
import { BodyCollector, parseJsonBody, tooLarge, type BodyLimits } from './body.js';
import { Router } from './router.js';
import { UwsResponseStream } from './stream.js';
import type { Headers, HttpContext, RequestSnapshot, ResponseStream, Route, StreamOptions } from './types.js';
import { RequestSignal, type CancelSignal } from '../domain/cancel.js';

/** What the server reports about each finished request (for logs and metrics). */
export interface RequestRecord {
  /** The id sent back as X-Request-Id. */
  id: string;
  method: string;
  route: string;
  status: number;
  durationMs: number;
  aborted: boolean;
}

export interface HttpServerOptions {
  routes: readonly Route[];
  limits: BodyLimits;
  /** How far to believe X-Forwarded-For (only entries appended by trusted proxies). */
  trustProxy: TrustProxy;
  /** A stream whose client has not drained for this long is closed (default 30 s). */
  streamStallTimeoutMs?: number;
  /** Routes still served while draining (the health probe, so it can say `draining`). */
  drainingRoutes?: readonly string[];
  /** Cross-origin access for browser apps (`cors.origins`); none by default. */
  cors?: CorsPolicy | undefined;
  onRequestDone(record: RequestRecord): void;
  onBackpressure(): void;
  /** Unexpected (non-ApiError) failures; never sent to the client. */
  onInternalError(error: unknown, route: string): void;
  /** The JSON body of an error for a path (the /v1 surface speaks OpenAI's error shape); default `error.toBody()`. */
  errorBody?: (path: string, error: ApiError) => unknown;
}

const SECURITY_HEADERS: ReadonlyArray<[string, string]> = [
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  ['X-Frame-Options', 'DENY'],
];
const SECURITY_LINES = SECURITY_HEADERS.map(([name, value]) => `\r\n${name}: ${value}`).join('');
const NO_EXTRA_HEADERS: Headers = Object.freeze({});
/** Content types remembered per header set; more (say, one per uploaded file's type) are joined each time. */
const MAX_BLOCKS_PER_SET = 16;
const headBlocks = new WeakMap<Headers, Map<string, string>>();

/**
 * Content-Type's value followed by the lines of the security headers and of a frozen header set (a
 * constant such as NO_STORE): the native binding writes a header's name and value as given, so one
 * writeHeader call carries them all, and each call costs about 0.2 µs whatever its length. The text
 * is joined once per header set and content type; only frozen sets qualify, since a set that could
 * change after its text was kept would go out stale.
 */
function headBlock(contentType: string, headers: Headers): string {
  let byType = headBlocks.get(headers);
  if (!byType) {
    byType = new Map();
    headBlocks.set(headers, byType);
  }
  let block = byType.get(contentType);
  if (block === undefined) {
    block = contentType + SECURITY_LINES;
    for (const name in headers) block += `\r\n${name}: ${headers[name]}`;
    if (byType.size < MAX_BLOCKS_PER_SET) byType.set(contentType, block);
  }
  return block;
}

const textDecoder = new TextDecoder();
/** Request ids: a per-process random prefix and a counter, unique without a random draw per request. */
const REQUEST_ID_PREFIX = `req_${randomBytes(6).toString('hex')}`;
let requestCounter = 0;
function nextRequestId(): string {
  requestCounter += 1;
  return REQUEST_ID_PREFIX + requestCounter.toString(36).padStart(8, '0');
}
/** How long requests told to stop at the end of the grace period get to write their last event. */
const SHUTDOWN_WRITE_MS = 1000;

function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * The request snapshot: a class rather than an object literal with getters, so a request allocates
 * no getter closures; query parsing and the address lookup are paid only by the routes that read
 * them (most don't). The address comes from the response, valid until it ends or aborts.
 */
class UwsRequest implements RequestSnapshot {
  private parsedQuery: URLSearchParams | undefined;
  private address: string | undefined;

  constructor(
    readonly method: string,
    readonly path: string,
    readonly route: string,
    readonly params: Readonly<Record<string, string>>,
    readonly headers: Readonly<Record<string, string>>,
    private readonly rawQuery: string,
    readonly id: string,
    private readonly response: HttpResponse,
    private readonly server: HttpServer,
  ) {}

  get query(): URLSearchParams {
    this.parsedQuery ??= new URLSearchParams(this.rawQuery);
    return this.parsedQuery;
  }

  get clientAddress(): string {
    this.address ??= this.server.clientAddress(this.response, this.headers);
    return this.address;
  }
}

/** Per-request state behind HttpContext. */
class UwsContext implements HttpContext {
  /** Neighbours in the server's list of requests in flight (see InFlight). */
  previousInFlight: UwsContext | undefined;
  nextInFlight: UwsContext | undefined;
  listedInFlight = false;
  /** Created on first use of `signal`: most requests never read it. */
  private requestSignal: RequestSignal | undefined;
  private abortReason: ClientGone | undefined;
  private finished = false;
  private aborted = false;
  private status = 0;
  private activeStream: UwsResponseStream | undefined;
  private readonly startedAt = performance.now();

  constructor(
    private readonly response: HttpResponse,
    readonly request: RequestSnapshot,
    private readonly body: BodyCollector,
    private readonly server: HttpServer,
    /** The allowed cross-origin requester, whose origin every reply header block echoes. */
    private readonly corsOrigin: string | undefined = undefined,
  ) {}

  get signal(): CancelSignal {
    if (!this.requestSignal) {
      this.requestSignal = new RequestSignal();
      // A client that left before anyone asked still yields an aborted signal.
      if (this.abortReason) this.requestSignal.abort(this.abortReason);
    }
    return this.requestSignal;
  }

  get responded(): boolean {
    return this.status !== 0;
  }

  /** The single onAborted: fires the request's signal and releases everything once. */
  handleAbort(): void {
    if (this.aborted || this.finished) return;
    this.aborted = true;
    this.body.abort();
    this.activeStream?.markAborted();
    this.abortReason = new ClientGone();
    this.requestSignal?.abort(this.abortReason);
    this.complete();
  }

  async readJson(options: { optional?: boolean } = {}): Promise<unknown> {
    const bytes = await this.body.bytes();
    if (bytes.length === 0 && options.optional) return undefined;
    return parseJsonBody(this.request.headers['content-type'], bytes, this.server.limits);
  }

  bodyPieces(): AsyncIterable<Buffer> {
    return this.body.pieces();
  }

  json(status: number, body: unknown, headers?: Headers): void {
    this.send(status, 'application/json', JSON.stringify(body), headers);
  }

  send(status: number, contentType: string, body: string | Uint8Array, headers?: Headers): void {
    if (this.isGone()) return;
    this.status = status;
    // A body refused mid-read leaves bytes on the wire: close the connection rather than parse them.
    const closeConnection = this.body.overflowed;
    this.response.cork(() => {
      this.writeHead(status, contentType, headers);
      // A HEAD reply carries the GET reply's headers and length, never its body.
      if (this.request.method === 'HEAD')
        this.response.endWithoutBody(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength, closeConnection);
      else this.response.end(body, closeConnection);
    });
    this.complete();
  }

  stream(options: StreamOptions): ResponseStream {
    if (this.isGone()) throw new ApiError('internal', 'The response has already been sent.');
    this.status = options.status ?? 200;
    this.response.cork(() => {
      this.writeHead(this.status, options.contentType, { 'Cache-Control': 'no-cache', ...options.headers });
    });
    this.activeStream = new UwsResponseStream(
      this.response,
      { onBackpressure: () => this.server.onBackpressure() },
      { heartbeat: options.heartbeat, stallTimeoutMs: this.server.streamStallTimeoutMs },
      () => this.complete(),
    );
    return this.activeStream;
  }

  /** Sends an error as JSON if nothing went out yet; otherwise the stream just ends. */
  fail(error: unknown): void {
    const apiError = toApiError(error);
    if (!(error instanceof ApiError)) this.server.onInternalError(error, this.request.route);
    if (this.isGone()) return;
    if (this.activeStream) {
      this.activeStream.end();
      return;
    }
    if (this.responded) return;
    this.json(apiError.status, this.server.errorBody(this.request.path, apiError), apiError.headers);
  }

  /** Guarantees the request ends even if a handler forgot to reply. */
  ensureEnded(): void {
    if (this.isGone() || this.activeStream) return;
    this.fail(new Error(`handler for ${this.request.route} returned without replying`));
  }

  /**
   * Ends the work at the end of the grace period: the request's signal fires with ServerShutdown,
   * so the pipeline stops its upstream, stores the partial turn and ends a stream with one
   * `error` event (a reply not yet started becomes a 503).
   */
  shutdown(): void {
    if (this.isGone()) return;
    this.abortReason = new ServerShutdown();
    this.requestSignal?.abort(this.abortReason);
  }

  /** Closes the socket of a request that did not end after shutdown(). */
  forceClose(): void {
    if (this.isGone()) return;
    this.response.close();
  }

  private isGone(): boolean {
    return this.finished || this.aborted;
  }

  private writeHead(status: number, contentType: string, headers: Headers | undefined): void {
    // Status first: any header written before it fixes the status at 200, which is why a 200 needs
    // no status call at all (one native call less on every ordinary reply).
    if (status !== 200) this.response.writeStatus(statusLine(status));
    // Every header goes out in one native call, as lines after Content-Type's value (the bytes on the
    // wire are the same as one call per header, which costs about 0.2 µs each).
    const frozen = headers === undefined || Object.isFrozen(headers);
    let block = headBlock(contentType, frozen ? (headers ?? NO_EXTRA_HEADERS) : NO_EXTRA_HEADERS);
    if (!frozen) for (const name in headers) block += `\r\n${name}: ${headers[name]}`;
    block += `\r\nX-Request-Id: ${this.request.id}`;
    if (this.corsOrigin) {
      const cors = corsHeaders(this.corsOrigin);
      for (const name in cors) block += `\r\n${name}: ${cors[name]}`;
    }
    this.response.writeHeader('Content-Type', block);
  }

  private complete(): void {
    if (this.finished) return;
    this.finished = true;
    this.server.release(this, {
      id: this.request.id,
      method: this.request.method,
      route: this.request.route,
      status: this.aborted && this.status === 0 ? 499 : this.status,
      durationMs: performance.now() - this.startedAt,
      aborted: this.aborted,
    });
  }
}

/**
 * The requests being served, as a list threaded through the contexts: adding and removing one is a
 * few field writes, where a Set hashed every new context on add and on delete (both showed in the
 * /health profile).
 */
class InFlight {
  private head: UwsContext | undefined;
  size = 0;

  add(context: UwsContext): void {
    context.previousInFlight = undefined;
    context.nextInFlight = this.head;
    if (this.head) this.head.previousInFlight = context;
    this.head = context;
    context.listedInFlight = true;
    this.size += 1;
  }

  delete(context: UwsContext): void {
    if (!context.listedInFlight) return;
    context.listedInFlight = false;
    if (context.previousInFlight) context.previousInFlight.nextInFlight = context.nextInFlight;
    else this.head = context.nextInFlight;
    if (context.nextInFlight) context.nextInFlight.previousInFlight = context.previousInFlight;
    context.previousInFlight = undefined;
    context.nextInFlight = undefined;
    this.size -= 1;
  }

  /** A copy of the list (callers end requests while walking it). */
  toArray(): UwsContext[] {
    const contexts: UwsContext[] = [];
    for (let context = this.head; context; context = context.nextInFlight) contexts.push(context);
    return contexts;
  }
}

/** The HTTP server: routes, limits, in-flight tracking and graceful close. */
export class HttpServer {
  readonly limits: BodyLimits;
  private readonly app: TemplatedApp;
  private readonly router: Router;
  private listenSocket: us_listen_socket | undefined;
  private readonly inflight = new InFlight();
  private idleWaiters: Array<() => void> = [];
  private draining = false;

  constructor(private readonly options: HttpServerOptions) {
    this.limits = options.limits;
    this.router = new Router(options.routes);
    this.app = uWS.App();
    // The catch-all: without it uWS closes the socket of an unmatched request.
    this.app.any('/*', (response, request) => this.dispatch(response, request));
  }

  get streamStallTimeoutMs(): number {
    return this.options.streamStallTimeoutMs ?? 30_000;
  }

  /** Number of requests still being served. */
  get activeRequests(): number {
    return this.inflight.size;
  }

  onBackpressure(): void {
    this.options.onBackpressure();
  }

  onInternalError(error: unknown, route: string): void {
    this.options.onInternalError(error, route);
  }

  /** The body of an error reply on `path`. */
  errorBody(path: string, error: ApiError): unknown {
    return this.options.errorBody ? this.options.errorBody(path, error) : error.toBody();
  }

  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (socket) => {
        if (!socket) {
          reject(new Error(`cannot listen on ${host}:${port}`));
          return;
        }
        this.listenSocket = socket;
        resolve(uWS.us_socket_local_port(socket));
      });
    });
  }

  /** Stops accepting, waits up to `graceMs` for in-flight requests, then closes what is left. */
  /**
   * Drains: new requests get 503 `unavailable` with Retry-After (the probe routes still answer, so
   * a load balancer sees `draining`), in-flight work may finish within `graceMs`, the listener
   * stays open until nothing is in flight (a load balancer's next probe must not be refused), then
   * closes. At the end of the grace period every request still running is told (ServerShutdown)
   * and given a moment to write its last event before its socket is closed.
   */
  async close(graceMs: number): Promise<void> {
    this.draining = true;
    if (this.inflight.size > 0) {
      const idle = await this.waitIdle(graceMs);
      if (!idle) {
        for (const context of this.inflight.toArray()) context.shutdown();
        await this.waitIdle(SHUTDOWN_WRITE_MS);
      }
    }
    if (this.listenSocket) {
      uWS.us_listen_socket_close(this.listenSocket);
      this.listenSocket = undefined;
    }
    for (const context of this.inflight.toArray()) context.forceClose();
    (this.app as TemplatedApp & { close(): void }).close();
  }

  /** True when the server is draining (shutting down). */
  get isDraining(): boolean {
    return this.draining;
  }

  /** Resolves true once nothing is in flight, or false after `ms`. */
  private async waitIdle(ms: number): Promise<boolean> {
    if (this.inflight.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const idle = await Promise.race([
      new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true))),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
    clearTimeout(timer);
    return idle;
  }

  /** Called by a context exactly once when its response ended or aborted. */
  release(context: UwsContext, record: RequestRecord): void {
    this.inflight.delete(context);
    this.options.onRequestDone(record);
    if (this.inflight.size === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  private dispatch(response: HttpResponse, request: HttpRequest): void {
    // Everything below is read synchronously: the request object dies when this function returns.
    const method = request.getMethod().toUpperCase();
    const path = request.getUrl();
    const lookup = this.router.lookup(method, path);
    const headers: Record<string, string> = {};
    request.forEach((name, value) => {
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    });
    const snapshot = new UwsRequest(
      method,
      path,
      lookup.kind === 'not_found' ? 'unmatched' : lookup.kind === 'found' ? lookup.match.route : lookup.route,
      lookup.kind === 'found' ? lookup.match.params : NO_PARAMS,
      headers,
      request.getQuery() ?? '',
      nextRequestId(),
      response,
      this,
    );
    const routeLimit = lookup.kind === 'found' ? lookup.match.maxBodyBytes : undefined;
    const body = this.attachBody(
      response,
      headers,
      (typeof routeLimit === 'function' ? routeLimit(headers) : routeLimit) || this.limits.maxBytes,
    );
    const origin = allowedOrigin(this.options.cors, path, headers.origin);
    const context = new UwsContext(response, snapshot, body, this, method === 'OPTIONS' ? undefined : origin);
    // onAborted before anything that could return or await, or uWS aborts the process.
    response.onAborted(() => context.handleAbort());
    this.inflight.add(context);

    if (this.draining && !(lookup.kind === 'found' && this.options.drainingRoutes?.includes(lookup.match.route))) {
      context.fail(new ServerShutdown());
      return;
    }
    if (method === 'OPTIONS' && lookup.kind === 'method_not_allowed' && origin !== undefined) {
      // A preflight from an allowed origin: the route's methods, the headers a client may send.
      context.send(204, 'text/plain', '', preflightHeaders(origin, lookup.allow));
      return;
    }
    if (lookup.kind === 'not_found') {
      context.fail(new ApiError('not_found', `No route matches ${method} ${path}.`));
      return;
    }
    if (lookup.kind === 'method_not_allowed') {
      const allow = lookup.allow.join(', ');
      context.fail(new ApiError('method_not_allowed', `${method} is not allowed here; use ${allow}.`, { headers: { Allow: allow } }));
      return;
    }
    let outcome: Promise<void> | void;
    try {
      outcome = lookup.match.handler(context);
    } catch (error) {
      context.fail(error);
      return;
    }
    if (outcome && typeof outcome.then === 'function') {
      outcome.then(
        () => context.ensureEnded(),
        (error: unknown) => context.fail(error),
      );
    } else {
      context.ensureEnded();
    }
  }

  private attachBody(response: HttpResponse, headers: Record<string, string>, maxBytes: number): BodyCollector {
    const declared = headers['content-length'];
    const chunked = (headers['transfer-encoding'] ?? '').toLowerCase().includes('chunked');
    if (declared !== undefined && !chunked) {
      const length = Number(declared);
      if (!Number.isSafeInteger(length) || length < 0) {
        return BodyCollector.refused(maxBytes, new ApiError('invalid_request', 'The Content-Length header is not a valid length.'));
      }
      // Refused from the declared length: not a byte of it is read.
      if (length > maxBytes) return BodyCollector.refused(maxBytes, tooLarge(maxBytes));
      if (length === 0) return BodyCollector.empty();
    } else if (!chunked) {
      return BodyCollector.empty();
    }
    // With a declared length every chunk is copied once, straight into one buffer of that size.
    const collector = new BodyCollector(maxBytes, { kind: 'reading' }, chunked ? undefined : Number(declared));
    response.onData((chunk, isLast) => {
      // uWS neuters the ArrayBuffer after this callback: the collector copies what it keeps.
      collector.copy(chunk, isLast);
    });
    return collector;
  }

  /** The client's address: the peer, or what trusted proxies appended to X-Forwarded-For. */
  clientAddress(response: HttpResponse, headers: Readonly<Record<string, string>>): string {
    let peer: string;
    try {
      peer = textDecoder.decode(response.getRemoteAddressAsText());
    } catch {
      // Asked after the client left: the response object is gone.
      peer = 'unknown';
    }
    return clientAddressFrom(peer, headers['x-forwarded-for'], this.options.trustProxy);
  }
}
