/**
 * The offline default: "search" the local knowledge base through the RAG retriever, so search
 * routes answer with nothing configured and say so with provider `local`. Results are whole
 * documents (the best passage of each), with a snippet centred on the sentences that match.
 */
import type { Retriever } from '../rag/types.js';
import { capText, collapseWhitespace, SNIPPET_MAX_CHARS, toSearchQuery } from './normalise.js';
import type { SearchProvider, SearchResult } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** The retriever's top_k ceiling; asking for more passages than results leaves room to merge chunks of one document. */
const MAX_PASSAGES = 20;

/** Knowledge-base search behind the SearchProvider interface. */
export class LocalSearch implements SearchProvider {
  readonly name = 'local';
  readonly sourceKind = 'document' as const;

  constructor(private readonly retriever: Retriever) {}

  /** Top passages for the query, one per document, best first. */
  async search(query: string, options: { maxResults: number }, signal: CancelSignal): Promise<SearchResult[]> {
    const q = toSearchQuery(query);
    if (q === '') return [];
    // The knowledge base is not an upstream: its time is colloquy_retrieval_duration_seconds.
    const passages = await this.retriever.retrieve(q, { topK: Math.min(MAX_PASSAGES, options.maxResults * 3) }, signal);
    const seen = new Set<string>();
    const results: SearchResult[] = [];
    for (const passage of passages) {
      if (results.length >= options.maxResults) break;
      if (seen.has(passage.documentId)) continue;
      seen.add(passage.documentId);
      results.push({ title: passage.title, url: passage.url, snippet: focusedSnippet(passage.text, q) });
    }
    return results;
  }
}

const segmenter = new Intl.Segmenter(undefined, { granularity: 'sentence' });

function queryTerms(query: string): Set<string> {
  const terms = query.toLocaleLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  // One- and two-letter words ("a", "of", "is") match nearly every sentence and decide nothing.
  return new Set(terms.filter((term) => term.length > 2));
}

/**
 * The passage cut to a snippet around its best-matching sentence: that sentence, then its
 * neighbours while they fit. A passage is often longer than a snippet, and its opening
 * sentences are rarely the ones that answer the question.
 */
export function focusedSnippet(text: string, query: string, max = SNIPPET_MAX_CHARS): string {
  const plain = collapseWhitespace(text);
  if (plain.length <= max) return plain;
  const sentences = [...segmenter.segment(plain)].map((part) => part.segment.trim()).filter(Boolean);
  const terms = queryTerms(query);
  let best = 0;
  let bestScore = 0;
  sentences.forEach((sentence, index) => {
    const words = new Set(sentence.toLocaleLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
    let score = 0;
    for (const term of terms) if (words.has(term)) score += 1;
    if (score > bestScore) {
      best = index;
      bestScore = score;
    }
  });
  let first = best;
  let last = best;
  let length = sentences[best]?.length ?? 0;
  // Grow forwards first: the sentence after a match usually continues it.
  for (;;) {
    const next = sentences[last + 1];
    const previous = sentences[first - 1];
    if (next !== undefined && length + 1 + next.length <= max) {
      last += 1;
      length += 1 + next.length;
    } else if (previous !== undefined && length + 1 + previous.length <= max) {
      first -= 1;
      length += 1 + previous.length;
    } else {
      break;
    }
  }
  const window = sentences.slice(first, last + 1).join(' ');
  return capText(window, max);
}
