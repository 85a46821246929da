/**
 * One HTTP call to a search upstream: the request signal combined with the configured timeout,
 * redirects refused (only the configured host is ever contacted), the body read with a size cap,
 * and every failure turned into an ApiError whose message names the provider but never its key.
 */
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';

/** Upper bound on a search response body; real ones are tens of kilobytes. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** What every web search provider needs besides its own settings. */
export interface UpstreamDeps {
  metrics: Metrics;
  logger: Logger;
  timeoutMs: number;
}

export interface UpstreamRequest {
  /** Provider name, used in messages, logs and metric labels. */
  provider: string;
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** A completed upstream exchange: status and the body, parsed as JSON when it was JSON. */
export interface UpstreamReply {
  status: number;
  /** Parsed JSON, or undefined when the body was empty or not JSON. */
  json: unknown;
  /** True when the body was present but could not be parsed as JSON. */
  malformed: boolean;
}

/** Marks an abort caused by our own deadline, to tell it apart from the client leaving. */
class DeadlineReached extends Error {}

/** Performs the call and returns the reply, whatever its status; throws only for transport failures. */
export async function callUpstream(request: UpstreamRequest, deps: UpstreamDeps, signal: AbortSignal): Promise<UpstreamReply> {
  signal.throwIfAborted();
  const controller = new AbortController();
  const onClientAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onClientAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new DeadlineReached()), deps.timeoutMs);
  const started = performance.now();
  let outcome = 'ok';
  try {
    const response = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      // A redirect could lead anywhere; the only host we talk to is the configured one.
      redirect: 'manual',
      signal: controller.signal,
    });
    const text = await readCapped(response, request.provider);
    let json: unknown;
    let malformed = false;
    if (text.trim() !== '') {
      try {
        json = JSON.parse(text);
      } catch {
        malformed = true;
      }
    }
    if (response.status < 200 || response.status >= 300) outcome = 'error';
    return { status: response.status, json, malformed };
  } catch (error) {
    if (controller.signal.reason instanceof DeadlineReached) {
      outcome = 'timeout';
      throw new ApiError('upstream_timeout', `The search provider (${request.provider}) did not answer within ${deps.timeoutMs} ms.`);
    }
    if (signal.aborted) {
      outcome = 'aborted';
      throw signal.reason;
    }
    outcome = 'error';
    if (error instanceof ApiError) throw error;
    deps.logger.warn({ provider: request.provider, host: request.url.host, reason: describeCause(error) }, 'search upstream unreachable');
    throw new ApiError('upstream_error', `The search provider (${request.provider}) could not be reached.`);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onClientAbort);
    deps.metrics.upstreamDuration.observe({ provider: request.provider, outcome }, (performance.now() - started) / 1000);
  }
}

/** Reads the whole body as text, refusing bodies over the cap instead of buffering them. */
async function readCapped(response: Response, provider: string): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw new ApiError('upstream_error', `The search provider (${provider}) sent a response larger than ${MAX_RESPONSE_BYTES} bytes.`);
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return error instanceof Error ? error.name : 'unknown';
}

/** Keeps an upstream error code only if it looks like a code (`RATE_LIMITED`), never free text. */
export function safeUpstreamCode(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : undefined;
}

/**
 * The ApiError for a non-2xx reply. `credentialCodes` lists upstream error codes that mean the key
 * was refused even though the status says otherwise (Brave answers a bad key with 422).
 */
export function statusError(provider: string, status: number, upstreamCode: string | undefined, credentialCodes: readonly string[] = []): ApiError {
  const label = `HTTP ${status}${upstreamCode ? ` ${upstreamCode}` : ''}`;
  if (status >= 300 && status < 400) {
    return new ApiError('upstream_error', `The search provider (${provider}) answered with a redirect (${label}), which is not followed; check search.base_url.`);
  }
  if (status === 401 || status === 403 || (upstreamCode !== undefined && credentialCodes.includes(upstreamCode))) {
    return new ApiError('upstream_error', `The search provider (${provider}) refused the configured credentials (${label}).`);
  }
  if (status === 429) {
    return new ApiError('upstream_error', `The search provider (${provider}) is rate limiting this server (${label}); try again later.`);
  }
  if (status >= 500) return new ApiError('upstream_error', `The search provider (${provider}) failed (${label}).`);
  return new ApiError('upstream_error', `The search provider (${provider}) rejected the request (${label}).`);
}

/** The ApiError for a 2xx reply that is not JSON or lacks the expected field. */
export function shapeError(provider: string, expected: string, reply: UpstreamReply): ApiError {
  const what = reply.malformed ? 'a response that is not valid JSON' : `JSON without ${expected}`;
  return new ApiError('upstream_error', `The search provider (${provider}) sent ${what}.`);
}

/** A plain object view of an unknown JSON value, or undefined. */
export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** A string field of an unknown JSON object, or '' when absent or not a string. */
export function stringField(record: Record<string, unknown>, key: string): string {
  const value = record[key];
  return typeof value === 'string' ? value : '';
}

/** `{base}/{path}` keeping any path prefix the base URL has (a SearXNG under /searx/). */
export function endpoint(baseUrl: string, path: string): URL {
  return new URL(path.replace(/^\/+/, ''), baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
}
