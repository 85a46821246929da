/** The web search step: one small interface over SearXNG, Brave, Tavily and the local knowledge base. */
import type { CancelSignal } from '../domain/cancel.js';
export interface SearchResult {
  title: string;
  url: string | undefined;
  snippet: string;
}

export interface SearchProvider {
  /** Name reported in `search.provider` (`searxng`, `brave`, `tavily`, `local`). */
  readonly name: string;
  /** What its results are, as sources: `web` pages, or `document`s of the local knowledge base. */
  readonly sourceKind: 'web' | 'document';
  /** Returns at most `maxResults` de-duplicated results. Throws ApiError on upstream failure. */
  search(query: string, options: { maxResults: number }, signal: CancelSignal): Promise<SearchResult[]>;
}
