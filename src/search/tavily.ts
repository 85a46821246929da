/**
 * Tavily: `POST {base}/search` with `Authorization: Bearer <key>` and
 * `{query, max_results, search_depth}`; results in `results[].{title,url,content}`. Errors come as
 * `{detail: {error: "<sentence>"}}` with 401 (bad key), 429 (rate limit), 432/433 (plan or
 * pay-as-you-go limit) and 5xx.
 */
import { ApiError } from '../errors.js';
import { toSearchQuery } from './normalise.js';
import type { SearchProvider, SearchResult } from './types.js';
import { asRecord, callUpstream, endpoint, shapeError, toSearchResults, type UpstreamDeps } from './search-call.js';
import { statusError } from '../upstream/upstream-error.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Tavily's maximum `max_results`. */
const TAVILY_MAX_RESULTS = 20;

export interface TavilyOptions {
  baseUrl: string;
  apiKey: string;
}

/** Web search through the Tavily Search API. */
export class TavilySearch implements SearchProvider {
  readonly name = 'tavily';
  readonly sourceKind = 'web' as const;

  constructor(
    private readonly options: TavilyOptions,
    private readonly deps: UpstreamDeps,
  ) {}

  /** Runs one `basic` depth query (one credit) asking for exactly the number of results wanted. */
  async search(query: string, options: { maxResults: number }, signal: CancelSignal): Promise<SearchResult[]> {
    const q = toSearchQuery(query);
    if (q === '') return [];
    const body = JSON.stringify({
      query: q,
      max_results: Math.min(TAVILY_MAX_RESULTS, Math.max(1, options.maxResults)),
      search_depth: 'basic',
    });
    const headers = { accept: 'application/json', 'content-type': 'application/json', authorization: `Bearer ${this.options.apiKey}` };
    const reply = await callUpstream(
      { provider: this.name, url: endpoint(this.options.baseUrl, 'search'), method: 'POST', headers, body },
      this.deps,
      signal,
    );
    if (reply.status === 432 || reply.status === 433) {
      throw new ApiError(
        'upstream_error',
        `The search provider (tavily) refused the request because the account's usage limit is reached (HTTP ${reply.status}).`,
      );
    }
    if (reply.status < 200 || reply.status >= 300) throw statusError(`search provider (${this.name})`, reply.status);
    const results = asRecord(reply.json)?.results;
    if (!Array.isArray(results)) throw shapeError(this.name, 'a `results` list', reply);
    return toSearchResults(results, 'content', options.maxResults);
  }
}
