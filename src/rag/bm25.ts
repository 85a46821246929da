/**
 * Okapi BM25 over the segmented posting blocks. Work per query is bounded: query terms are visited
 * rarest first; a term whose posting list is short is scanned (its block in every segment), and a
 * term found in more than SCAN_LIMIT chunks is only looked up (a binary search per block) for the
 * chunks the rarer terms already found. Scores stay exact for every chunk that contains at least
 * one of the rarer terms; only when every query term is that common is a scan cut at SCAN_LIMIT
 * postings. Document frequencies come from rag-df, which counts live chunks only, so the scores
 * are those of an index built from scratch; postings of deleted chunks are skipped at the end.
 */
import { BlockReader } from './postings.js';

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
  /** The chunk's number. */
  chunk: number;
  score: number;
}

export interface LexicalIndex {
  /** A segment's block of a term (valid until the next call), or undefined when the segment lacks the term. */
  block: (segment: string, term: string) => Uint8Array | undefined;
  /** A term's document frequency in live chunks. */
  df: (term: string) => number;
}

/** A searchable segment: its key and the chunk numbers it covers. */
export interface SegmentView {
  key: string;
  first: number;
  span: number;
}

export interface CorpusFigures {
  chunks: number;
  averageLength: number;
}

/** The `limit` best live chunks for the query terms, best first (ties broken by chunk number, so results are stable). */
export function scoreBm25(
  index: LexicalIndex,
  segments: readonly SegmentView[],
  queryTerms: string[],
  corpus: CorpusFigures,
  options: { limit: number; scanLimit?: number | undefined; isLive: (chunk: number) => boolean },
): LexicalHit[] {
  return topHits(scoreChunks(index, segments, queryTerms, corpus, options), options.limit, options.isLive);
}

/** The distinct query terms that are scored, rarest first, with their document frequencies. */
export function scoredTerms(queryTerms: readonly string[], df: (term: string) => number): Array<{ term: string; df: number }> {
  return [...new Set(queryTerms)]
    .map((term) => ({ term, df: df(term) }))
    .filter((entry) => entry.df > 0)
    .sort((left, right) => left.df - right.df)
    .slice(0, MAX_QUERY_TERMS);
}

/**
 * The BM25 score of every candidate chunk, live or not (scoreBm25 keeps the best live ones; an
 * engine whose liveness check is asynchronous ranks them with rankCandidates).
 */
export function scoreChunks(
  index: LexicalIndex,
  segments: readonly SegmentView[],
  queryTerms: string[],
  corpus: CorpusFigures,
  options: { scanLimit?: number | undefined },
): Map<number, number> {
  const scanLimit = options.scanLimit ?? SCAN_LIMIT;
  if (corpus.chunks === 0 || queryTerms.length === 0 || segments.length === 0) return new Map();
  const unique = scoredTerms(queryTerms, index.df);
  const scores = new Map<number, number>();
  const averageLength = corpus.averageLength || 1;
  const weight = (tf: number, length: number, idf: number) => (idf * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * length) / averageLength));

  for (const { term, df } of unique) {
    const idf = Math.log(1 + (corpus.chunks - df + 0.5) / (df + 0.5));
    if (df > scanLimit && scores.size > 0) {
      for (const segment of segments) {
        const block = readBlock(index, segment.key, term);
        if (!block) continue;
        const reader = new BlockReader(block);
        const end = segment.first + segment.span;
        for (const [chunk, score] of scores) {
          if (chunk < segment.first || chunk >= end) continue;
          const entry = reader.find(chunk - segment.first);
          if (entry >= 0) scores.set(chunk, score + weight(reader.tf(entry), reader.length(entry), idf));
        }
      }
      continue;
    }
    let scanned = 0;
    for (const segment of segments) {
      if (scanned >= scanLimit) break;
      const block = readBlock(index, segment.key, term);
      if (!block) continue;
      const reader = new BlockReader(block);
      const count = Math.min(reader.count, scanLimit - scanned);
      for (let entry = 0; entry < count; entry += 1) {
        const chunk = segment.first + reader.offset(entry);
        scores.set(chunk, (scores.get(chunk) ?? 0) + weight(reader.tf(entry), reader.length(entry), idf));
      }
      scanned += count;
    }
  }
  return scores;
}

/** A segment's block of a term (each block is used up before the next is read). */
function readBlock(index: LexicalIndex, segment: string, term: string): Uint8Array | undefined {
  return index.block(segment, term);
}

/** Orders hits best first: higher score, then lower chunk number. */
export function betterHit(left: LexicalHit, right: LexicalHit): boolean {
  return left.score > right.score || (left.score === right.score && left.chunk < right.chunk);
}

/** The `limit` highest scores of live chunks, best first, without sorting every candidate. */
function topHits(scores: Map<number, number>, limit: number, isLive: (chunk: number) => boolean): LexicalHit[] {
  const best: LexicalHit[] = [];
  const better = betterHit;
  for (const [chunk, score] of scores) {
    const hit = { chunk, score };
    if (best.length === limit && !better(hit, best[best.length - 1] as LexicalHit)) continue;
    // Only a chunk that would enter the list pays for the liveness check.
    if (!isLive(chunk)) continue;
    let index = best.length;
    while (index > 0 && better(hit, best[index - 1] as LexicalHit)) index -= 1;
    best.splice(index, 0, hit);
    if (best.length > limit) best.pop();
  }
  return best;
}
