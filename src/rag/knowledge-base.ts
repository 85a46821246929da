/**
 * The knowledge base: documents in named collections, cut into chunks, indexed for BM25 in LMDB
 * (and for vector search when an embeddings upstream is configured), plus retrieval statistics.
 *
 * Layout (one sub-database each, all in the service's single LMDB environment):
 *   rag-documents   document_id → DocumentRecord
 *   rag-by-coll     `${collection}\0${document_id}` → 1 (lists a collection without a full scan)
 *   rag-collections name → {documents, chunks, code}
 *   rag-chunks      chunk key → ChunkRecord (text and token length)
 *   rag-postings    `${term}\0${collection code}\0${chunk key}` → [tf, chunk length]
 *   rag-terms       term → document frequency (in chunks)
 *   rag-vectors     `${collection code}\0${chunk key}` → Float32 vector bytes (embeddings only)
 *   rag-meta        corpus totals, sequences, persisted query counters, index settings
 *
 * Chunk keys and collection codes are short base-36 sequence numbers rather than names: a chunk
 * has ~100 postings, so every byte of the posting key is paid ~100 times (see docs/benchmarks.md).
 *
 * Writes run in synchronous LMDB write transactions: lmdb-js asynchronous transaction callbacks
 * never run on this platform (the promise stays pending), and a synchronous transaction is also what
 * makes the read-modify-write of counters safe across worker processes sharing the environment.
 */
import { createHash } from 'node:crypto';
import type { Database } from 'lmdb';
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LmdbStorage } from '../store/lmdb.js';
import { chunkText } from './chunk.js';
import type { Embedder } from './embeddings.js';
import { extractText, type DocumentFormat } from './extract.js';
import { scoreBm25, type LexicalHit } from './bm25.js';
import { termFrequencies, tokenize } from './tokenize.js';
import type { Passage, Retriever } from './types.js';

export const DEFAULT_COLLECTION = 'default';
/** Collection names are path- and key-safe. */
export const COLLECTION_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Reciprocal rank fusion constant (Cormack et al. 2009). */
const RRF_K = 60;

export interface DocumentInput {
  title: string;
  /** The document's content in `format` (plain text by default). */
  text: string;
  url?: string | undefined;
  collection?: string | undefined;
  format?: DocumentFormat | undefined;
  /** Title used when `title` is empty and the document names none itself (a file name). */
  defaultTitle?: string | undefined;
  /**
   * What makes two ingestions "the same document" (default: the url, else the title). The id is
   * derived from collection + key, so re-ingesting replaces instead of duplicating.
   */
  key?: string | undefined;
}

export interface IngestResult {
  document_id: string;
  collection: string;
  title: string;
  chunks: number;
  /** True when a document with the same id existed and was replaced. */
  replaced: boolean;
}

export interface DocumentRecord {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  chunks: number;
  /** Keys of its chunks in rag-chunks, in order. */
  chunk_keys: string[];
  chars: number;
  format: DocumentFormat;
  indexed_at: string;
}

export interface DocumentSummary {
  document_id: string;
  title: string;
  url?: string;
  collection: string;
  chunks: number;
  chars: number;
  indexed_at: string;
}

interface ChunkRecord {
  document_id: string;
  collection: string;
  ordinal: number;
  text: string;
  /** Token count, the BM25 document length. */
  length: number;
}

interface CorpusRecord {
  documents: number;
  chunks: number;
  total_length: number;
  last_indexed: string | null;
}

interface CountersRecord {
  queries: number;
  hits: number;
  total_ms: number;
}

interface CollectionRecord {
  documents: number;
  chunks: number;
  /** Short code used in posting and vector keys. */
  code: string;
}

export interface CollectionSummary {
  name: string;
  documents: number;
  chunks: number;
}

/** The body of GET /api/chat/rag/stats. */
export interface RagStats {
  documents: number;
  chunks: number;
  collections: number;
  index_bytes: number;
  queries: number;
  hit_rate: number;
  avg_retrieval_ms: number;
  last_indexed: string | null;
  retriever: { kind: 'bm25' | 'hybrid'; embedding_model?: string };
}

export interface KnowledgeBaseOptions {
  chunkSize: number;
  chunkOverlap: number;
  /** Passages below this score (BM25, or cosine similarity for vector hits) are not returned. */
  minScore: number;
  embedder?: Embedder | undefined;
  logger?: Logger | undefined;
  /** Called with each retrieval's duration in seconds (the Prometheus histogram). */
  observeRetrieval?: ((seconds: number) => void) | undefined;
  /** Drop English stop words; fixed when the index is first created (stored in rag-meta). */
  stopWords?: boolean;
  /** How long query counters may stay in memory before they are written (ms). */
  statsFlushMs?: number;
  /** Posting-list length above which a term is only looked up, not scanned (bm25.ts SCAN_LIMIT). */
  scanLimit?: number;
}

/** Where the `add` of a batch is: for progress bars. */
export type ProgressListener = (done: number, total: number, result: IngestResult) => void;

const EMPTY_CORPUS: CorpusRecord = { documents: 0, chunks: 0, total_length: 0, last_indexed: null };
const EMPTY_COUNTERS: CountersRecord = { queries: 0, hits: 0, total_ms: 0 };

/** The id of a document from its collection and identity key. */
export function documentIdFor(collection: string, key: string): string {
  return `doc_${createHash('sha256').update(`${collection}\u0000${key}`).digest('hex').slice(0, 24)}`;
}

/** The public id of a chunk (Passage.chunkId): its document and position. */
function chunkIdFor(documentId: string, ordinal: number): string {
  return `${documentId}-${ordinal}`;
}

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in LMDB. */
export class KnowledgeBase implements Retriever {
  private readonly documents: Database<DocumentRecord, string>;
  private readonly byCollection: Database<number, string>;
  private readonly collectionsDb: Database<CollectionRecord, string>;
  private readonly chunks: Database<ChunkRecord, string>;
  private readonly postings: Database<[number, number], string>;
  private readonly terms: Database<number, string>;
  private readonly vectors: Database<Buffer, string>;
  private readonly meta: Database<unknown, string>;
  private readonly stopWords: boolean;
  /** Query counters not yet written to LMDB. */
  private pending: CountersRecord = { ...EMPTY_COUNTERS };
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly storage: LmdbStorage,
    private readonly options: KnowledgeBaseOptions,
  ) {
    const root = storage.root;
    this.documents = root.openDB<DocumentRecord, string>({ name: 'rag-documents' });
    this.byCollection = root.openDB<number, string>({ name: 'rag-by-coll' });
    this.collectionsDb = root.openDB<CollectionRecord, string>({ name: 'rag-collections' });
    this.chunks = root.openDB<ChunkRecord, string>({ name: 'rag-chunks' });
    this.postings = root.openDB<[number, number], string>({ name: 'rag-postings' });
    this.terms = root.openDB<number, string>({ name: 'rag-terms' });
    this.vectors = root.openDB<Buffer, string>({ name: 'rag-vectors', encoding: 'binary' });
    this.meta = root.openDB<unknown, string>({ name: 'rag-meta' });
    // The stop-word setting decides which postings exist, so it is fixed at index creation:
    // deleting a document re-tokenises its chunks and must produce the same terms.
    const settings = this.meta.get('settings') as { stop_words: boolean } | undefined;
    if (settings) this.stopWords = settings.stop_words;
    else {
      this.stopWords = options.stopWords ?? true;
      this.meta.putSync('settings', { stop_words: this.stopWords });
    }
  }

  /** The retriever kind reported in stats. */
  get kind(): 'bm25' | 'hybrid' {
    return this.options.embedder ? 'hybrid' : 'bm25';
  }

  /** Extracts, chunks, embeds (when configured) and indexes one document, replacing an earlier version. */
  async add(input: DocumentInput, signal?: AbortSignal): Promise<IngestResult> {
    const prepared = await this.prepare(input, signal);
    return this.storage.root.transactionSync(() => {
      const frequencies = new Map<string, number>();
      const result = this.write(prepared, frequencies);
      this.applyFrequencies(frequencies);
      return result;
    });
  }

  /**
   * Indexes many documents, committing in batches of `batchSize` (fewer transactions, and readers
   * see progress). Calls `onProgress` after each document.
   */
  async addMany(inputs: DocumentInput[], options: { batchSize?: number; onProgress?: ProgressListener; signal?: AbortSignal } = {}): Promise<IngestResult[]> {
    const batchSize = options.batchSize ?? 64;
    const results: IngestResult[] = [];
    for (let start = 0; start < inputs.length; start += batchSize) {
      const batch: PreparedDocument[] = [];
      for (const input of inputs.slice(start, start + batchSize)) batch.push(await this.prepare(input, options.signal));
      const written = this.storage.root.transactionSync(() => {
        const frequencies = new Map<string, number>();
        const batchResults = batch.map((prepared) => this.write(prepared, frequencies));
        this.applyFrequencies(frequencies);
        return batchResults;
      });
      for (const result of written) {
        results.push(result);
        options.onProgress?.(results.length, inputs.length, result);
      }
    }
    return results;
  }

  private async prepare(input: DocumentInput, signal?: AbortSignal): Promise<PreparedDocument> {
    const collection = input.collection ?? DEFAULT_COLLECTION;
    if (!COLLECTION_PATTERN.test(collection)) {
      throw new ApiError('invalid_request', undefined, { details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }] });
    }
    const format = input.format ?? 'text';
    const extracted = extractText(input.text, format);
    if (!extracted.text.trim()) {
      throw new ApiError('invalid_request', undefined, { details: [{ path: 'text', message: 'contains no text to index' }] });
    }
    const title = input.title.trim() || extracted.title || input.defaultTitle || 'Untitled';
    const key = input.key ?? input.url ?? title;
    const id = documentIdFor(collection, key);
    const pieces = chunkText(extracted.text, { size: this.options.chunkSize, overlap: this.options.chunkOverlap });
    const vectors = this.options.embedder ? await this.options.embedder.embed(pieces, signal) : undefined;
    return { id, key, title, url: input.url, collection, format, text: extracted.text, pieces, vectors };
  }

  /**
   * Runs inside a write transaction. Document-frequency changes are collected in `dfChanges`
   * and written once per transaction by applyFrequencies (one read-write per distinct term).
   */
  private write(prepared: PreparedDocument, dfChanges: Map<string, number>): IngestResult {
    const existing = this.documents.get(prepared.id);
    if (existing) this.removeInTransaction(existing, dfChanges);
    const now = new Date().toISOString();
    const corpus = this.corpus();
    const collection = this.collectionsDb.get(prepared.collection) ?? { documents: 0, chunks: 0, code: this.nextSequence('collection_sequence') };
    const code = collection.code;
    let totalLength = 0;
    const chunkKeys: string[] = [];
    prepared.pieces.forEach((text, ordinal) => {
      const chunkId = this.nextSequence('chunk_sequence');
      chunkKeys.push(chunkId);
      const frequencies = termFrequencies(text, { stopWords: this.stopWords });
      let length = 0;
      for (const count of frequencies.values()) length += count;
      totalLength += length;
      this.chunks.put(chunkId, { document_id: prepared.id, collection: prepared.collection, ordinal, text, length });
      for (const [term, tf] of frequencies) {
        this.postings.put(`${term}\u0000${code}\u0000${chunkId}`, [tf, length]);
        dfChanges.set(term, (dfChanges.get(term) ?? 0) + 1);
      }
      const vector = prepared.vectors?.[ordinal];
      if (vector) this.vectors.put(`${code}\u0000${chunkId}`, Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength));
    });
    this.documents.put(prepared.id, {
      id: prepared.id,
      key: prepared.key,
      title: prepared.title,
      url: prepared.url,
      collection: prepared.collection,
      chunks: prepared.pieces.length,
      chunk_keys: chunkKeys,
      chars: prepared.text.length,
      format: prepared.format,
      indexed_at: now,
    });
    this.byCollection.put(`${prepared.collection}\u0000${prepared.id}`, 1);
    this.collectionsDb.put(prepared.collection, { documents: collection.documents + 1, chunks: collection.chunks + prepared.pieces.length, code });
    this.meta.put('corpus', {
      documents: corpus.documents + 1,
      chunks: corpus.chunks + prepared.pieces.length,
      total_length: corpus.total_length + totalLength,
      last_indexed: now,
    } satisfies CorpusRecord);
    return { document_id: prepared.id, collection: prepared.collection, title: prepared.title, chunks: prepared.pieces.length, replaced: existing !== undefined };
  }

  /** Adds collected document-frequency changes to rag-terms; runs inside a write transaction. */
  private applyFrequencies(frequencies: Map<string, number>): void {
    for (const [term, change] of frequencies) {
      if (change === 0) continue;
      const frequency = (this.terms.get(term) ?? 0) + change;
      if (frequency > 0) this.terms.put(term, frequency);
      else this.terms.remove(term);
    }
  }

  /** Removes a document and everything indexed for it; runs inside a write transaction. */
  private removeInTransaction(document: DocumentRecord, frequencies: Map<string, number>): void {
    let removedLength = 0;
    const code = this.collectionsDb.get(document.collection)?.code;
    for (const chunkId of document.chunk_keys) {
      const chunk = this.chunks.get(chunkId);
      if (!chunk) continue;
      removedLength += chunk.length;
      for (const term of termFrequencies(chunk.text, { stopWords: this.stopWords }).keys()) {
        this.postings.remove(`${term}\u0000${code}\u0000${chunkId}`);
        frequencies.set(term, (frequencies.get(term) ?? 0) - 1);
      }
      this.chunks.remove(chunkId);
      this.vectors.remove(`${code}\u0000${chunkId}`);
    }
    this.documents.remove(document.id);
    this.byCollection.remove(`${document.collection}\u0000${document.id}`);
    const collection = this.collectionsDb.get(document.collection);
    if (collection) {
      const documents = collection.documents - 1;
      if (documents <= 0) this.collectionsDb.remove(document.collection);
      else this.collectionsDb.put(document.collection, { documents, chunks: Math.max(0, collection.chunks - document.chunks), code: collection.code });
    }
    const corpus = this.corpus();
    this.meta.put('corpus', {
      documents: Math.max(0, corpus.documents - 1),
      chunks: Math.max(0, corpus.chunks - document.chunks),
      total_length: Math.max(0, corpus.total_length - removedLength),
      last_indexed: corpus.last_indexed,
    } satisfies CorpusRecord);
  }

  /** The next value of a persisted counter, base 36; runs inside a write transaction. */
  private nextSequence(name: 'chunk_sequence' | 'collection_sequence'): string {
    const value = ((this.meta.get(name) as number | undefined) ?? 0) + 1;
    this.meta.put(name, value);
    return value.toString(36);
  }

  /** True when the collection holds at least one document. */
  hasCollection(name: string): boolean {
    return this.collectionsDb.get(name) !== undefined;
  }

  /** One document's summary, or undefined. */
  get(documentId: string): DocumentSummary | undefined {
    const record = this.documents.get(documentId);
    return record ? summarise(record) : undefined;
  }

  /** Deletes a document; false when no such document (in that collection, when one is named). */
  remove(documentId: string, collection?: string): boolean {
    return this.storage.root.transactionSync(() => {
      const document = this.documents.get(documentId);
      if (!document || (collection !== undefined && document.collection !== collection)) return false;
      const frequencies = new Map<string, number>();
      this.removeInTransaction(document, frequencies);
      this.applyFrequencies(frequencies);
      return true;
    });
  }

  /** Deletes every document of a collection; returns how many were removed. */
  removeCollection(collection: string): number {
    let removed = 0;
    for (;;) {
      // Bounded batches keep each write transaction short.
      const ids = Array.from(this.byCollection.getKeys({ start: `${collection}\u0000`, end: `${collection}\u0001`, limit: 100 }), (key) =>
        key.slice(collection.length + 1),
      );
      if (ids.length === 0) return removed;
      removed += this.storage.root.transactionSync(() => {
        let count = 0;
        const frequencies = new Map<string, number>();
        for (const id of ids) {
          const document = this.documents.get(id);
          if (document) {
            this.removeInTransaction(document, frequencies);
            count += 1;
          } else this.byCollection.remove(`${collection}\u0000${id}`);
        }
        this.applyFrequencies(frequencies);
        return count;
      });
    }
  }

  /** Documents ordered by id, optionally within one collection, `limit` at a time after `after`. */
  list(options: { collection?: string; limit: number; after?: string }): DocumentSummary[] {
    const { collection, limit, after } = options;
    if (collection !== undefined) {
      const start = `${collection}\u0000${after ? `${after}\u0000` : ''}`;
      const ids = Array.from(this.byCollection.getKeys({ start, end: `${collection}\u0001`, limit }), (key) => key.slice(collection.length + 1));
      return ids.map((id) => this.documents.get(id)).filter((record): record is DocumentRecord => record !== undefined).map(summarise);
    }
    const start = after ? `${after}\u0000` : undefined;
    return Array.from(this.documents.getRange({ start, limit }), ({ value }) => summarise(value));
  }

  /** Every collection with its counts. */
  collections(): CollectionSummary[] {
    return Array.from(this.collectionsDb.getRange({ limit: 10_000 }), ({ key, value }) => ({ name: key, documents: value.documents, chunks: value.chunks }));
  }

  private corpus(): CorpusRecord {
    return (this.meta.get('corpus') as CorpusRecord | undefined) ?? EMPTY_CORPUS;
  }

  /** Top-k passages for a query (BM25, fused with vector similarity when embeddings are on). */
  async retrieve(query: string, options: { topK: number; collection?: string }, signal?: AbortSignal): Promise<Passage[]> {
    const started = performance.now();
    const topK = Math.max(1, Math.min(options.topK, 50));
    const candidatesWanted = Math.max(50, topK * 4);
    const corpus = this.corpus();
    // An unknown collection has no code: nothing can match, but the query still counts.
    const code = options.collection === undefined ? undefined : this.collectionsDb.get(options.collection)?.code;
    const searchable = corpus.chunks > 0 && (options.collection === undefined || code !== undefined);
    const lexical = searchable
      ? scoreBm25(
          { postings: this.postings, terms: this.terms },
          tokenize(query, { stopWords: this.stopWords }),
          { chunks: corpus.chunks, averageLength: corpus.total_length / corpus.chunks },
          { collection: code, limit: candidatesWanted, scanLimit: this.options.scanLimit },
        )
      : [];

    let vectorHits: VectorHit[] = [];
    if (this.options.embedder && searchable) {
      try {
        const [vector] = await this.options.embedder.embed([query], signal);
        if (vector) vectorHits = this.vectorSearch(vector, code, candidatesWanted);
      } catch (error) {
        if (signal?.aborted) throw error;
        // Lexical retrieval still answers when the embeddings upstream is down.
        this.options.logger?.warn({ err: error }, 'query embedding failed; using BM25 only');
      }
    }
    signal?.throwIfAborted();

    const ranked = this.fuse(lexical, vectorHits).slice(0, topK);
    const passages: Passage[] = [];
    const titles = new Map<string, DocumentRecord | undefined>();
    for (const hit of ranked) {
      const chunk = this.chunks.get(hit.chunkId);
      if (!chunk) continue;
      if (!titles.has(chunk.document_id)) titles.set(chunk.document_id, this.documents.get(chunk.document_id));
      const document = titles.get(chunk.document_id);
      if (!document) continue;
      passages.push({ documentId: document.id, chunkId: chunkIdFor(document.id, chunk.ordinal), title: document.title, url: document.url, text: chunk.text, score: round(hit.score, 6) });
    }
    const elapsedMs = performance.now() - started;
    this.options.observeRetrieval?.(elapsedMs / 1000);
    this.count(passages.length > 0, elapsedMs);
    return passages;
  }

  /** Ranks by BM25 alone, or by reciprocal rank fusion of both lists; drops results under the threshold. */
  private fuse(lexical: LexicalHit[], vectorHits: VectorHit[]): Array<{ chunkId: string; score: number }> {
    const minScore = this.options.minScore;
    if (vectorHits.length === 0) {
      return lexical.filter((hit) => hit.score >= minScore).map((hit) => ({ chunkId: hit.chunkId, score: hit.score }));
    }
    const fused = new Map<string, { score: number; relevant: boolean }>();
    lexical.forEach((hit, rank) => {
      fused.set(hit.chunkId, { score: 1 / (RRF_K + rank + 1), relevant: hit.score >= minScore });
    });
    vectorHits.forEach((hit, rank) => {
      const entry = fused.get(hit.chunkId) ?? { score: 0, relevant: false };
      entry.score += 1 / (RRF_K + rank + 1);
      entry.relevant ||= hit.similarity >= minScore;
      fused.set(hit.chunkId, entry);
    });
    return [...fused]
      .filter(([, entry]) => entry.relevant)
      .map(([chunkId, entry]) => ({ chunkId, score: entry.score }))
      .sort((left, right) => right.score - left.score || (left.chunkId < right.chunkId ? -1 : 1));
  }

  /** Exact cosine similarity over the stored unit vectors of one collection (or all). */
  private vectorSearch(query: Float32Array, code: string | undefined, limit: number): VectorHit[] {
    const range = code === undefined ? {} : { start: `${code}\u0000`, end: `${code}\u0001` };
    const best: VectorHit[] = [];
    for (const { key, value } of this.vectors.getRange(range)) {
      // A Float32Array view needs 4-byte alignment; LMDB hands out buffers at any offset.
      const vector =
        value.byteOffset % 4 === 0
          ? new Float32Array(value.buffer, value.byteOffset, value.byteLength / 4)
          : new Float32Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
      if (vector.length !== query.length) continue;
      let similarity = 0;
      for (let index = 0; index < vector.length; index += 1) similarity += vector[index]! * query[index]!;
      if (best.length === limit && similarity <= best[best.length - 1]!.similarity) continue;
      const chunkId = key.slice(key.indexOf('\u0000') + 1);
      insertSorted(best, { chunkId, similarity }, limit);
    }
    return best;
  }

  private count(hit: boolean, elapsedMs: number): void {
    this.pending.queries += 1;
    if (hit) this.pending.hits += 1;
    this.pending.total_ms += elapsedMs;
    if (!this.flushTimer && !this.closed) {
      // Counters are written in the background so a query never waits for a disk sync.
      this.flushTimer = setTimeout(() => this.flushCounters(), this.options.statsFlushMs ?? 250);
      this.flushTimer.unref();
    }
  }

  /** Adds the in-memory counters to the stored ones in one transaction (safe across processes). */
  flushCounters(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const pending = this.pending;
    if (pending.queries === 0 || this.closed) return;
    this.pending = { ...EMPTY_COUNTERS };
    this.storage.root.transactionSync(() => {
      const stored = (this.meta.get('counters') as CountersRecord | undefined) ?? EMPTY_COUNTERS;
      this.meta.put('counters', {
        queries: stored.queries + pending.queries,
        hits: stored.hits + pending.hits,
        total_ms: stored.total_ms + pending.total_ms,
      } satisfies CountersRecord);
    });
  }

  /** Writes pending counters; call before the storage closes. */
  close(): void {
    this.flushCounters();
    this.closed = true;
  }

  /** The figures of GET /api/chat/rag/stats. */
  stats(): RagStats {
    const corpus = this.corpus();
    const stored = (this.meta.get('counters') as CountersRecord | undefined) ?? EMPTY_COUNTERS;
    const queries = stored.queries + this.pending.queries;
    const hits = stored.hits + this.pending.hits;
    const totalMs = stored.total_ms + this.pending.total_ms;
    const retriever: RagStats['retriever'] = { kind: this.kind };
    if (this.options.embedder) retriever.embedding_model = this.options.embedder.model;
    return {
      documents: corpus.documents,
      chunks: corpus.chunks,
      collections: this.collectionsDb.getCount(),
      index_bytes: this.indexBytes(),
      queries,
      hit_rate: queries > 0 ? round(hits / queries, 4) : 0,
      avg_retrieval_ms: queries > 0 ? round(totalMs / queries, 3) : 0,
      last_indexed: corpus.last_indexed,
      retriever,
    };
  }

  /** Pages used by the knowledge base's sub-databases, in bytes. */
  private indexBytes(): number {
    let bytes = 0;
    for (const db of [this.documents, this.byCollection, this.collectionsDb, this.chunks, this.postings, this.terms, this.vectors, this.meta]) {
      const stats = db.getStats() as { pageSize: number; treeBranchPageCount: number; treeLeafPageCount: number; overflowPages: number };
      bytes += (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages) * stats.pageSize;
    }
    return bytes;
  }
}

interface PreparedDocument {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  format: DocumentFormat;
  text: string;
  pieces: string[];
  vectors: Float32Array[] | undefined;
}

interface VectorHit {
  chunkId: string;
  similarity: number;
}

function summarise(record: DocumentRecord): DocumentSummary {
  const summary: DocumentSummary = {
    document_id: record.id,
    title: record.title,
    collection: record.collection,
    chunks: record.chunks,
    chars: record.chars,
    indexed_at: record.indexed_at,
  };
  if (record.url !== undefined) summary.url = record.url;
  return summary;
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Keeps `list` sorted by similarity (best first) and at most `limit` long. */
function insertSorted(list: VectorHit[], hit: VectorHit, limit: number): void {
  let index = list.length;
  while (index > 0 && list[index - 1]!.similarity < hit.similarity) index -= 1;
  list.splice(index, 0, hit);
  if (list.length > limit) list.pop();
}
