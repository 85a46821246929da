/**
 * Okapi BM25 over the postings kept in LMDB. Work per query is bounded: query terms are visited
 * rarest first; a term whose posting list is short is scanned, and a term found in more than
 * SCAN_LIMIT chunks is only looked up (point reads) for the chunks the rarer terms already found.
 * Scores stay exact for every chunk that contains at least one of the rarer terms; only when
 * every query term is that common is a scan cut at SCAN_LIMIT postings.
 */
import type { Database } from 'lmdb';

/** BM25 parameters (the usual defaults). */
const K1 = 1.2;
const B = 0.75;
/** Postings read per term before switching to point lookups. */
export const SCAN_LIMIT = 5000;
/**
 * Distinct query terms scored, the rarest first: a 32k-character message pasted as a question
 * would otherwise cost one posting read per word it contains.
 */
const MAX_QUERY_TERMS = 32;

export interface LexicalHit {
  chunkId: string;
  score: number;
}

export interface LexicalIndex {
  postings: Database<[number, number], string>;
  terms: Database<number, string>;
}

export interface CorpusFigures {
  chunks: number;
  averageLength: number;
}

/**
 * The `limit` best chunks for the query terms, best first (ties broken by chunk key, so results are
 * stable). `collection` is the collection's short code as used in posting keys.
 */
export function scoreBm25(
  index: LexicalIndex,
  queryTerms: string[],
  corpus: CorpusFigures,
  options: { collection: string | undefined; limit: number; scanLimit?: number },
): LexicalHit[] {
  const scanLimit = options.scanLimit ?? SCAN_LIMIT;
  if (corpus.chunks === 0 || queryTerms.length === 0) return [];
  const unique = [...new Set(queryTerms)]
    .map((term) => ({ term, df: index.terms.get(term) ?? 0 }))
    .filter((entry) => entry.df > 0)
    .sort((left, right) => left.df - right.df)
    .slice(0, MAX_QUERY_TERMS);
  const scores = new Map<string, number>();
  // Candidate chunk key → its collection code, needed to build the posting key for point lookups.
  const collections = new Map<string, string>();
  const averageLength = corpus.averageLength || 1;
  const weight = (tf: number, length: number, idf: number) => (idf * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * length) / averageLength));

  for (const { term, df } of unique) {
    const idf = Math.log(1 + (corpus.chunks - df + 0.5) / (df + 0.5));
    if (df > scanLimit && scores.size > 0) {
      for (const [chunkId, collection] of collections) {
        const posting = index.postings.get(`${term}\u0000${collection}\u0000${chunkId}`);
        if (posting) scores.set(chunkId, (scores.get(chunkId) ?? 0) + weight(posting[0], posting[1], idf));
      }
      continue;
    }
    const prefix = options.collection === undefined ? `${term}\u0000` : `${term}\u0000${options.collection}\u0000`;
    const end = options.collection === undefined ? `${term}\u0001` : `${term}\u0000${options.collection}\u0001`;
    for (const { key, value } of index.postings.getRange({ start: prefix, end, limit: scanLimit })) {
      const chunkStart = key.lastIndexOf('\u0000') + 1;
      const chunkId = key.slice(chunkStart);
      if (!collections.has(chunkId)) collections.set(chunkId, key.slice(term.length + 1, chunkStart - 1));
      scores.set(chunkId, (scores.get(chunkId) ?? 0) + weight(value[0], value[1], idf));
    }
  }
  return topHits(scores, options.limit);
}

/** The `limit` highest scores, best first, without sorting every candidate. */
function topHits(scores: Map<string, number>, limit: number): LexicalHit[] {
  const best: LexicalHit[] = [];
  const better = (left: LexicalHit, right: LexicalHit) =>
    left.score > right.score || (left.score === right.score && left.chunkId < right.chunkId);
  for (const [chunkId, score] of scores) {
    const hit = { chunkId, score };
    if (best.length === limit && !better(hit, best[best.length - 1]!)) continue;
    let index = best.length;
    while (index > 0 && better(hit, best[index - 1]!)) index -= 1;
    best.splice(index, 0, hit);
    if (best.length > limit) best.pop();
  }
  return best;
}
