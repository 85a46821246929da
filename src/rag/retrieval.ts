/**
 * Retrieval and scoring: BM25 candidates from the postings, exact cosine similarity over the
 * stored vectors when embeddings are on, the two lists fused by reciprocal rank, and the winners
 * turned into passages with their document's title and url.
 */
import type { Logger } from '../logger.js';
import { scoreBm25, type LexicalHit, type SegmentView } from './bm25.js';
import type { Embedder } from './embeddings.js';
import {
  blockKey,
  chunkIdFor,
  pageDirectoryKey,
  readCorpus,
  segmentTermCount,
  segmentTermsKey,
  type DocumentRecord,
  type RagDatabases,
  type SegmentTerms,
} from './index-store.js';
import { findInPage, PageDirectory, pageKey } from './pages.js';
import { round } from './round.js';
import { tokenize } from './tokenize.js';
import type { Passage } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Reciprocal rank fusion constant (Cormack et al. 2009). */
const RRF_K = 60;

/** What a retrieval reads and how it ranks. */
export interface RetrievalContext {
  databases: RagDatabases;
  stopWords: boolean;
  /** Passages below this score (BM25, or cosine similarity for vector hits) are not returned. */
  minScore: number;
  scanLimit?: number | undefined;
  embedder?: Embedder | undefined;
  logger?: Logger | undefined;
  /** Terms of unpublished segments, read once per segment. */
  pendingTerms: Map<string, PendingTerms>;
  /** Page directories of the segments read, loaded once per segment (null: one key per term, the layout before pages). */
  directories: Map<string, PageDirectory | null>;
}

export interface VectorHit {
  chunk: number;
  similarity: number;
}

/** An unpublished segment's terms: term → [position in its sorted list, chunks that hold it]. */
type PendingTerms = Map<string, [number, number]>;

/**
 * The segments a query reads (live ones, and those being merged until the merge swaps them out,
 * of one collection or all), and a document-frequency reader that leaves out what unpublished
 * segments already added to rag-df.
 */
function openSegments(context: RetrievalContext, code: string | undefined): { views: SegmentView[]; df: (term: string) => number } {
  const { databases } = context;
  const views: SegmentView[] = [];
  const pending: Array<{ terms: PendingTerms; applied: number }> = [];
  const seen = new Set<string>();
  let readable = 0;
  for (const { key, value } of databases.segments.getRange()) {
    if ((value.df_applied ?? 0) > 0 && (value.state === 'building' || value.state === 'abandoned')) {
      seen.add(key);
      let terms = context.pendingTerms.get(key);
      if (!terms) {
        const stored = databases.meta.get(segmentTermsKey(key)) as SegmentTerms | undefined;
        const map: PendingTerms = new Map();
        if (stored) {
          stored.terms.split('\n').forEach((term, index) => {
            map.set(term, [index, segmentTermCount(stored, index)]);
          });
        }
        terms = map;
        context.pendingTerms.set(key, terms);
      }
      pending.push({ terms, applied: value.df_applied ?? 0 });
    }
    if (value.state !== 'live' && value.state !== 'merging') continue;
    readable += 1;
    if (code !== undefined && value.code !== code) continue;
    views.push({ key, first: value.first_chunk, span: value.span });
  }
  for (const key of context.pendingTerms.keys()) if (!seen.has(key)) context.pendingTerms.delete(key);
  // Directories of segments merged away are dropped (a segment's key is never used again).
  if (context.directories.size > readable) {
    for (const key of context.directories.keys()) {
      const record = databases.segments.get(key);
      if (record?.state !== 'live' && record?.state !== 'merging') context.directories.delete(key);
    }
  }
  const df = (term: string) => {
    let frequency = databases.df.get(term) ?? 0;
    for (const { terms, applied } of pending) {
      const entry = terms.get(term);
      if (entry && entry[0] < applied) frequency -= entry[1];
    }
    return frequency;
  };
  return { views, df };
}

/** Top-k passages for a query (BM25, fused with vector similarity when embeddings are on). */
export async function retrievePassages(
  context: RetrievalContext,
  query: string,
  options: { topK: number; collection?: string },
  signal?: CancelSignal,
): Promise<Passage[]> {
  const { databases } = context;
  const topK = Math.max(1, Math.min(options.topK, 50));
  const candidatesWanted = Math.max(50, topK * 4);
  const corpus = readCorpus(databases);
  // An unknown collection has no code: nothing can match, but the query still counts.
  const code =
    options.collection === undefined || !databases.collections.doesExist(options.collection)
      ? undefined
      : (databases.meta.get(`code:${options.collection}`) as string | undefined);
  const searchable = corpus.chunks > 0 && (options.collection === undefined || code !== undefined);
  const isLive = (chunk: number) => databases.chunks.doesExist(chunk);
  const segments = openSegments(context, code);
  const lexical = searchable
    ? scoreBm25(
        { block: (segment, term) => readBlock(context, segment, term), df: segments.df },
        segments.views,
        tokenize(query, { stopWords: context.stopWords }),
        { chunks: corpus.chunks, averageLength: corpus.total_length / corpus.chunks },
        { limit: candidatesWanted, scanLimit: context.scanLimit, isLive },
      )
    : [];

  let vectorHits: VectorHit[] = [];
  if (context.embedder && searchable) {
    try {
      const [vector] = await context.embedder.embed([query], signal);
      if (vector) vectorHits = vectorSearch(databases, vector, code, candidatesWanted);
    } catch (error) {
      if (signal?.aborted) throw error;
      // Lexical retrieval still answers when the embeddings upstream is down.
      context.logger?.warn({ err: error }, 'query embedding failed; using BM25 only');
    }
  }
  signal?.throwIfAborted();

  const ranked = fuse(lexical, vectorHits, context.minScore).slice(0, topK);
  const passages: Passage[] = [];
  const titles = new Map<string, DocumentRecord | undefined>();
  for (const hit of ranked) {
    const chunk = databases.chunks.get(hit.chunk);
    if (!chunk) continue;
    if (!titles.has(chunk.document_id)) titles.set(chunk.document_id, databases.documents.get(chunk.document_id));
    const document = titles.get(chunk.document_id);
    if (!document) continue;
    passages.push(passageOf(document, chunk, hit.score));
  }
  return passages;
}

/** A ranked chunk as a passage (both engines). */
export function passageOf(
  document: Pick<DocumentRecord, 'id' | 'title' | 'url'>,
  chunk: { text: string; ordinal: number; page?: number | undefined },
  score: number,
): Passage {
  return {
    documentId: document.id,
    chunkId: chunkIdFor(document.id, chunk.ordinal),
    title: document.title,
    url: document.url,
    text: chunk.text,
    score: round(score, 6),
    ...(chunk.page !== undefined ? { page: chunk.page } : {}),
  };
}

/**
 * A segment's block of a term without copying it, from the term's page (or its own key in a
 * segment written before pages). getBinaryFast answers in a shared buffer, valid until the next
 * read (each block is used up before the next is read), whose `length`, not its byteLength, is
 * the value's size.
 */
function readBlock(context: RetrievalContext, segment: string, term: string): Uint8Array | undefined {
  const { databases, directories } = context;
  let directory = directories.get(segment);
  if (directory === undefined) {
    const stored = databases.meta.get(pageDirectoryKey(segment)) as string | undefined;
    directory = stored === undefined ? null : new PageDirectory(stored);
    directories.set(segment, directory);
  }
  if (directory === null) {
    const block = databases.blocks.getBinaryFast(blockKey(segment, term));
    return block ? block.subarray(0, block.length) : undefined;
  }
  const page = directory.pageOf(term);
  if (page < 0) return undefined;
  const stored = databases.blocks.getBinaryFast(pageKey(segment, page));
  return stored ? findInPage(stored.subarray(0, stored.length), term) : undefined;
}

/** Ranks by BM25 alone, or by reciprocal rank fusion of both lists; drops results under the threshold. */
export function fuse(lexical: LexicalHit[], vectorHits: VectorHit[], minScore: number): Array<{ chunk: number; score: number }> {
  if (vectorHits.length === 0) {
    return lexical.filter((hit) => hit.score >= minScore).map((hit) => ({ chunk: hit.chunk, score: hit.score }));
  }
  const fused = new Map<number, { score: number; relevant: boolean }>();
  lexical.forEach((hit, rank) => {
    fused.set(hit.chunk, { score: 1 / (RRF_K + rank + 1), relevant: hit.score >= minScore });
  });
  vectorHits.forEach((hit, rank) => {
    const entry = fused.get(hit.chunk) ?? { score: 0, relevant: false };
    entry.score += 1 / (RRF_K + rank + 1);
    entry.relevant ||= hit.similarity >= minScore;
    fused.set(hit.chunk, entry);
  });
  return [...fused]
    .filter(([, entry]) => entry.relevant)
    .map(([chunk, entry]) => ({ chunk, score: entry.score }))
    .sort((left, right) => right.score - left.score || left.chunk - right.chunk);
}

/** Exact cosine similarity over the stored unit vectors of one collection (or all). */
function vectorSearch(databases: RagDatabases, query: Float32Array, code: string | undefined, limit: number): VectorHit[] {
  const range = code === undefined ? {} : { start: `${code}\u0000`, end: `${code}\u0001` };
  const best: VectorHit[] = [];
  for (const { key, value } of databases.vectors.getRange(range)) {
    const similarity = cosine(value, query);
    if (similarity === undefined) continue;
    if (best.length === limit && similarity <= best[best.length - 1]!.similarity) continue;
    const chunk = Number(key.slice(key.indexOf('\u0000') + 1));
    insertSorted(best, { chunk, similarity }, limit);
  }
  return best;
}

/** The similarity of a stored unit vector (Float32 bytes) and the query; undefined when their dimensions differ. */
export function cosine(value: Uint8Array, query: Float32Array): number | undefined {
  // A Float32Array view needs 4-byte alignment; LMDB hands out buffers at any offset.
  const vector =
    value.byteOffset % 4 === 0
      ? new Float32Array(value.buffer, value.byteOffset, value.byteLength / 4)
      : new Float32Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  if (vector.length !== query.length) return undefined;
  let similarity = 0;
  for (let index = 0; index < vector.length; index += 1) similarity += vector[index]! * query[index]!;
  return similarity;
}

/** Keeps `list` sorted by similarity (best first) and at most `limit` long. */
export function insertSorted(list: VectorHit[], hit: VectorHit, limit: number): void {
  let index = list.length;
  while (index > 0 && list[index - 1]!.similarity < hit.similarity) index -= 1;
  list.splice(index, 0, hit);
  if (list.length > limit) list.pop();
}
