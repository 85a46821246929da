/**
 * The HTTP surface routes see. Nothing here mentions uWS: routes get a request snapshot, an abort
 * signal, a body reader and reply/stream helpers, so the binding can be swapped inside src/http.
 */
import type { CancelSignal } from '../domain/cancel.js';
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Everything about the request, copied synchronously before the handler can await. */
export interface RequestSnapshot {
  method: string;
  /** Path without query string, percent-decoding left to params. */
  path: string;
  /** The route template that matched (`/api/chat/session/:id`), used for metrics and logs. */
  route: string;
  query: URLSearchParams;
  /** Lower-cased header names. */
  headers: Readonly<Record<string, string>>;
  params: Readonly<Record<string, string>>;
  clientAddress: string;
  /** This request's id, sent back as `X-Request-Id` and written to its log lines. */
  id: string;
}

export type Headers = Record<string, string>;

/** A response body being streamed (SSE or NDJSON) with backpressure. */
export interface ResponseStream {
  /**
   * Writes one frame: true when the client can take more at once, else a promise that resolves
   * once it can. False (or a promise of false) when the client is gone.
   */
  write(frame: string): boolean | Promise<boolean>;
  /** Ends the body; safe to call more than once or after the client left. */
  end(): void;
  /** True once the client disconnected or end() ran. */
  readonly closed: boolean;
}

export interface StreamOptions {
  status?: number;
  contentType: string;
  headers?: Headers;
  /** A frame written after this many ms of silence (SSE `: ping`). */
  heartbeat?: { intervalMs: number; frame: string };
}

/** What a handler gets for one request. */
export interface HttpContext {
  readonly request: RequestSnapshot;
  /** Fires when the client disconnects (or the server gives up on the request). */
  readonly signal: CancelSignal;
  /**
   * Reads and parses the JSON body (Content-Type, byte limit, strict UTF-8, depth cap).
   * With `optional`, an empty body yields undefined instead of an error.
   */
  readJson(options?: { optional?: boolean }): Promise<unknown>;
  /**
   * The raw body as it arrives, piece by piece, within the route's byte limit (file uploads parse
   * it as it comes); rejects with the error that stopped it.
   */
  bodyPieces(): AsyncIterable<Buffer>;
  /** Sends a JSON reply. */
  json(status: number, body: unknown, headers?: Headers): void;
  /** Sends any complete body with the given content type. */
  send(status: number, contentType: string, body: string | Uint8Array, headers?: Headers): void;
  /** Starts a streamed body; status and headers go out at once. */
  stream(options: StreamOptions): ResponseStream;
  /** True once a status line was written (errors then become stream events). */
  readonly responded: boolean;
}

export type Handler = (context: HttpContext) => Promise<void> | void;

export interface Route {
  method: HttpMethod;
  /** Template with `:name` segments; a trailing slash is not significant. */
  path: string;
  handler: Handler;
  /**
   * This route's body limit in bytes, when it differs from the server's (`v1_body_limit_bytes`);
   * a function decides from the request's lower-cased headers (file uploads by content type).
   */
  maxBodyBytes?: number | ((headers: Readonly<Record<string, string>>) => number | undefined);
}
