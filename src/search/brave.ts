/**
 * Brave Search: `GET {base}/res/v1/web/search?q=…&count=N` with `X-Subscription-Token`; results in
 * `web.results[].{title,url,description}` (descriptions carry <strong> highlights). Errors come as
 * `{type: "ErrorResponse", error: {code, detail, status}}` (some documents show `errors: [...]`);
 * a bad key is a 422 SUBSCRIPTION_TOKEN_INVALID rather than a 401.
 */
import { toSearchQuery } from './normalise.js';
import type { SearchProvider, SearchResult } from './types.js';
import { asRecord, callUpstream, endpoint, safeUpstreamCode, shapeError, toSearchResults, type UpstreamDeps } from './search-call.js';
import { statusError } from '../upstream/upstream-error.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Brave's maximum `count` for web search. */
const BRAVE_MAX_COUNT = 20;
const CREDENTIAL_CODES = ['SUBSCRIPTION_TOKEN_INVALID', 'SUBSCRIPTION_TOKEN_MISSING', 'SUBSCRIPTION_NOT_FOUND'] as const;

export interface BraveOptions {
  baseUrl: string;
  apiKey: string;
}

/** Web search through the Brave Search API. */
export class BraveSearch implements SearchProvider {
  readonly name = 'brave';
  readonly sourceKind = 'web' as const;

  constructor(
    private readonly options: BraveOptions,
    private readonly deps: UpstreamDeps,
  ) {}

  /** Runs one query asking Brave for exactly the number of results wanted. */
  async search(query: string, options: { maxResults: number }, signal: CancelSignal): Promise<SearchResult[]> {
    const q = toSearchQuery(query);
    if (q === '') return [];
    const url = endpoint(this.options.baseUrl, 'res/v1/web/search');
    url.searchParams.set('q', q);
    url.searchParams.set('count', String(Math.min(BRAVE_MAX_COUNT, Math.max(1, options.maxResults))));
    const headers = { accept: 'application/json', 'x-subscription-token': this.options.apiKey };
    const reply = await callUpstream({ provider: this.name, url, method: 'GET', headers }, this.deps, signal);
    if (reply.status < 200 || reply.status >= 300) {
      throw statusError(`search provider (${this.name})`, reply.status, {
        upstreamCode: braveErrorCode(reply.json),
        credentialCodes: CREDENTIAL_CODES,
      });
    }
    const body = asRecord(reply.json);
    if (!body) throw shapeError(this.name, 'a `web.results` list', reply);
    // A query with no web hits comes back without the `web` section at all.
    if (body.web === undefined) return [];
    const results = asRecord(body.web)?.results;
    if (!Array.isArray(results)) throw shapeError(this.name, 'a `web.results` list', reply);
    return toSearchResults(results, 'description', options.maxResults);
  }
}

function braveErrorCode(json: unknown): string | undefined {
  const body = asRecord(json);
  if (!body) return undefined;
  const single = asRecord(body.error);
  if (single) return safeUpstreamCode(single.code);
  const first = Array.isArray(body.errors) ? asRecord(body.errors[0]) : undefined;
  return first ? safeUpstreamCode(first.code) : undefined;
}
