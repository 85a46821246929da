/**
 * SearXNG: `GET {base}/search?q=…&format=json`, results in `results[].{title,url,content}`.
 * The instance must list `json` under `search.formats` in its settings.yml; otherwise it answers
 * 403, which is reported as such.
 */
import { ApiError } from '../errors.js';
import { toSearchQuery } from './normalise.js';
import type { SearchProvider, SearchResult } from './types.js';
import { asRecord, callUpstream, endpoint, shapeError, toSearchResults, type UpstreamDeps } from './search-call.js';
import { statusError } from '../upstream/upstream-error.js';
import type { CancelSignal } from '../domain/cancel.js';

export interface SearxngOptions {
  baseUrl: string;
  /** Optional bearer token for instances behind an authenticating proxy. */
  apiKey: string | undefined;
}

/** Web search through a self-hosted SearXNG instance's JSON API. */
export class SearxngSearch implements SearchProvider {
  readonly name = 'searxng';
  readonly sourceKind = 'web' as const;

  constructor(
    private readonly options: SearxngOptions,
    private readonly deps: UpstreamDeps,
  ) {}

  /** Runs one query; SearXNG has no result-count parameter, so the first page is cut to size. */
  async search(query: string, options: { maxResults: number }, signal: CancelSignal): Promise<SearchResult[]> {
    const q = toSearchQuery(query);
    if (q === '') return [];
    const url = endpoint(this.options.baseUrl, 'search');
    url.searchParams.set('q', q);
    url.searchParams.set('format', 'json');
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    const reply = await callUpstream({ provider: this.name, url, method: 'GET', headers }, this.deps, signal);
    if (reply.status === 403) {
      throw new ApiError(
        'upstream_error',
        'The search provider (searxng) refused the request (HTTP 403); JSON output must be enabled in its settings.yml (search.formats: [html, json]).',
      );
    }
    if (reply.status < 200 || reply.status >= 300) throw statusError(`search provider (${this.name})`, reply.status);
    const results = asRecord(reply.json)?.results;
    if (!Array.isArray(results)) throw shapeError(this.name, 'a `results` list', reply);
    return toSearchResults(results, 'content', options.maxResults);
  }
}
