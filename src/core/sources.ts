/**
 * Stage 2, gathering sources: passages from the knowledge base (`rag`) and results of the search
 * step (`web_search`, or always on the search route), numbered in the order they will be cited.
 */
import type { ChatEvent, SearchSummary, Source } from '../domain/types.js';
import { SNIPPET_MAX_CHARS } from '../domain/types.js';
import { toSearchQuery } from '../search/normalise.js';
import type { ChatDependencies, ChatJob, ChatSink } from './chat-job.js';
import type { CancelSignal } from '../domain/cancel.js';

const DEFAULT_TOP_K = 4;
const DEFAULT_MAX_RESULTS = 5;

/** What the stage found; `searched` is true when retrieval or search ran, even if it found nothing. */
export interface Gathered {
  sources: Source[];
  searched: boolean;
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
}

/** What a job without retrieval or search gathers. */
export const NO_SOURCES: Gathered = Object.freeze({ sources: Object.freeze([]) as unknown as Source[], searched: false });

/** True when the job runs retrieval or search at all. */
export function wantsSources(job: ChatJob): boolean {
  return Boolean(job.request.rag) || wantsSearch(job);
}

/** True when the job runs the search step. */
export function wantsSearch(job: ChatJob): boolean {
  return job.kind === 'search' || Boolean(job.request.web_search);
}

/**
 * Runs retrieval and search as the request asks, pushing their progress, then the search summary
 * and the sources. Undefined when the consumer stopped taking events.
 */
export async function gatherSources(
  job: ChatJob,
  deps: Pick<ChatDependencies, 'retriever' | 'search'>,
  signal: CancelSignal,
  emit: ChatSink,
): Promise<Gathered | undefined> {
  const { request } = job;
  const sources: Source[] = [];
  // The search summary and the sources, ready together once the last wait is over.
  const ready: ChatEvent[] = [];
  const add = (source: Omit<Source, 'index' | 'snippet'> & { snippet: string }): void => {
    sources.push({ ...source, index: sources.length + 1, snippet: cut(source.snippet, SNIPPET_MAX_CHARS) });
  };

  if (request.rag) {
    if (!(await emit([{ type: 'progress', stage: 'retrieval', message: 'Searching the knowledge base' }]))) return undefined;
    const options = typeof request.rag === 'object' ? request.rag : {};
    const passages = await deps.retriever.retrieve(
      request.message,
      { topK: options.top_k ?? DEFAULT_TOP_K, ...(options.collection ? { collection: options.collection } : {}) },
      signal,
    );
    for (const passage of passages)
      add({
        kind: 'document',
        title: passage.title,
        ...(passage.url ? { url: passage.url } : {}),
        ...(passage.page !== undefined ? { page: passage.page } : {}),
        snippet: passage.text,
      });
  }

  if (wantsSearch(job)) {
    if (!(await emit([{ type: 'progress', stage: 'search', message: 'Searching the web' }]))) return undefined;
    const fromFlag = typeof request.web_search === 'object' ? request.web_search.max_results : undefined;
    const maxResults = request.max_results ?? fromFlag ?? DEFAULT_MAX_RESULTS;
    const results = await deps.search.search(request.message, { maxResults }, signal);
    for (const result of results.slice(0, maxResults)) {
      add({ kind: deps.search.sourceKind, title: result.title, ...(result.url ? { url: result.url } : {}), snippet: result.snippet });
    }
    const summary: SearchSummary = { provider: deps.search.name, query: toSearchQuery(request.message), resultCount: results.length };
    ready.push({ type: 'search', ...summary });
  }

  const searched = Boolean(request.rag) || wantsSearch(job);
  if (searched) ready.push({ type: 'sources', sources });
  if (ready.length > 0 && !(await emit(ready))) return undefined;
  return { sources, searched };
}
