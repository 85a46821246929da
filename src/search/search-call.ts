/**
 * A search provider's call to its upstream: the shared JSON transport with the search cap, the
 * duration metric and a log line for an unreachable host; turning a status or shape into an error
 * (below) names the provider and status but never its key or the upstream's own words.
 */
import { ApiError } from '../errors.js';
import { callJson, type JsonReply } from '../upstream/json-call.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import { cleanSnippet, cleanTitle, dedupeResults } from './normalise.js';
import type { SearchResult } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Upper bound on a search response body; real ones are tens of kilobytes. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** What every web search provider needs besides its own settings. */
export interface UpstreamDeps {
  /** The upstream layer's metrics and log seam. */
  observer: UpstreamObserver;
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
export type UpstreamReply = JsonReply;

/** Performs the call and returns the reply, whatever its status; throws only for transport failures. */
export function callUpstream(request: UpstreamRequest, deps: UpstreamDeps, signal: CancelSignal): Promise<UpstreamReply> {
  const { provider, url } = request;
  return callJson({
    subject: `The search provider (${provider})`,
    url,
    method: request.method,
    headers: request.headers,
    body: request.body,
    signal,
    timeoutMs: deps.timeoutMs,
    maxBytes: MAX_RESPONSE_BYTES,
    provider,
    observer: deps.observer,
  });
}

/** Keeps an upstream error code only if it looks like a code (`RATE_LIMITED`), never free text. */
export function safeUpstreamCode(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : undefined;
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
function stringField(record: Record<string, unknown>, key: string): string {
  const value = record[key];
  return typeof value === 'string' ? value : '';
}

/**
 * An upstream's result list as normalised, deduplicated results (at most `maxResults`): every
 * provider sends `{title, url, <snippet>}` objects and differs only in the snippet's field name.
 * Entries that are not objects are skipped.
 */
export function toSearchResults(items: unknown[], snippetField: string, maxResults: number): SearchResult[] {
  return dedupeResults(
    items.map(asRecord).flatMap((item) =>
      item
        ? [
            {
              title: cleanTitle(stringField(item, 'title')),
              url: stringField(item, 'url').trim(),
              snippet: cleanSnippet(stringField(item, snippetField)),
            },
          ]
        : [],
    ),
    maxResults,
  );
}

/** `{base}/{path}` keeping any path prefix the base URL has (a SearXNG under /searx/). */
export function endpoint(baseUrl: string, path: string): URL {
  return new URL(path.replace(/^\/+/, ''), baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
}
