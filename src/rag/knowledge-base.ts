/**
 * The knowledge base: documents in named collections, cut into chunks, indexed for BM25 in LMDB
 * (and for vector search when an embeddings upstream is configured), plus retrieval statistics.
 * This class is the one entry point; the work lives in index-store.ts (layout and records),
 * ingestion.ts (prepare and index), retrieval.ts (ranking) and retrieval-stats.ts (counters).
 *
 * Writes run in synchronous LMDB write transactions: lmdb-js asynchronous transaction callbacks
 * never run on this platform (the promise stays pending), and a synchronous transaction is also what
 * makes the read-modify-write of counters safe across worker processes sharing the environment.
 */
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LmdbStorage } from '../store/lmdb.js';
import type { Embedder } from './embeddings.js';
import {
  openRagDatabases,
  summarise,
  type CollectionSummary,
  type DocumentRecord,
  type DocumentSummary,
  type RagDatabases,
} from './index-store.js';
import {
  IndexWriter,
  prepareDocument,
  type DocumentInput,
  type IngestResult,
  type PreparedDocument,
  type ProgressListener,
} from './ingestion.js';
import { retrievePassages, type RetrievalContext } from './retrieval.js';
import { RetrievalCounters, ragStats, type RagStats } from './retrieval-stats.js';
import type { Passage, Retriever } from './types.js';

export {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  type CollectionSummary,
  type DocumentSummary,
} from './index-store.js';
export type { DocumentInput, IngestResult, ProgressListener } from './ingestion.js';
export type { RagStats } from './retrieval-stats.js';

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

/** A document of a batch that could not be ingested: the catalogue error, and which input it was. */
export class IngestFailure extends ApiError {
  constructor(
    readonly index: number,
    cause: ApiError,
  ) {
    super(cause.code, cause.message, { details: cause.details });
  }
}

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in LMDB. */
export class KnowledgeBase implements Retriever {
  private readonly databases: RagDatabases;
  private readonly writer: IndexWriter;
  private readonly retrieval: RetrievalContext;
  private readonly counters: RetrievalCounters;

  constructor(
    private readonly storage: LmdbStorage,
    private readonly options: KnowledgeBaseOptions,
  ) {
    this.databases = openRagDatabases(storage.root);
    const { meta } = this.databases;
    // The stop-word setting decides which postings exist, so it is fixed at index creation:
    // deleting a document re-tokenises its chunks and must produce the same terms.
    const settings = meta.get('settings') as { stop_words: boolean } | undefined;
    let stopWords: boolean;
    if (settings) stopWords = settings.stop_words;
    else {
      stopWords = options.stopWords ?? true;
      meta.putSync('settings', { stop_words: stopWords });
    }
    this.writer = new IndexWriter(this.databases, stopWords);
    this.retrieval = {
      databases: this.databases,
      stopWords,
      minScore: options.minScore,
      scanLimit: options.scanLimit,
      embedder: options.embedder,
      logger: options.logger,
    };
    this.counters = new RetrievalCounters(storage.root, this.databases, options.statsFlushMs ?? 250);
  }

  /** The retriever kind reported in stats. */
  get kind(): 'bm25' | 'hybrid' {
    return this.options.embedder ? 'hybrid' : 'bm25';
  }

  /** Extracts, chunks, embeds (when configured) and indexes one document, replacing an earlier version. */
  async add(input: DocumentInput, signal?: AbortSignal): Promise<IngestResult> {
    const prepared = await prepareDocument(input, this.options, signal);
    return this.storage.root.transactionSync(() => {
      const frequencies = new Map<string, number>();
      const result = this.writer.write(prepared, frequencies);
      this.writer.applyFrequencies(frequencies);
      return result;
    });
  }

  /**
   * Indexes many documents, committing in batches of `batchSize` (fewer transactions, and readers
   * see progress). Calls `onProgress` after each document.
   */
  async addMany(
    inputs: DocumentInput[],
    options: { batchSize?: number; onProgress?: ProgressListener; signal?: AbortSignal } = {},
  ): Promise<IngestResult[]> {
    const batchSize = options.batchSize ?? 64;
    const results: IngestResult[] = [];
    for (let start = 0; start < inputs.length; start += batchSize) {
      const batch: PreparedDocument[] = [];
      for (const [offset, input] of inputs.slice(start, start + batchSize).entries()) {
        try {
          batch.push(await prepareDocument(input, this.options, options.signal));
        } catch (error) {
          // Which input failed is what a caller adding many needs to say (the CLI names the file).
          if (error instanceof ApiError) throw new IngestFailure(start + offset, error);
          throw error;
        }
      }
      const written = this.storage.root.transactionSync(() => {
        const frequencies = new Map<string, number>();
        const batchResults = batch.map((prepared) => this.writer.write(prepared, frequencies));
        this.writer.applyFrequencies(frequencies);
        return batchResults;
      });
      for (const result of written) {
        results.push(result);
        options.onProgress?.(results.length, inputs.length, result);
      }
    }
    return results;
  }

  /** True when the collection holds at least one document. */
  hasCollection(name: string): boolean {
    return this.databases.collections.get(name) !== undefined;
  }

  /** One document's summary, or undefined. */
  get(documentId: string): DocumentSummary | undefined {
    const record = this.databases.documents.get(documentId);
    return record ? summarise(record) : undefined;
  }

  /** Deletes a document; false when no such document (in that collection, when one is named). */
  remove(documentId: string, collection?: string): boolean {
    return this.storage.root.transactionSync(() => {
      const document = this.databases.documents.get(documentId);
      if (!document || (collection !== undefined && document.collection !== collection)) return false;
      const frequencies = new Map<string, number>();
      this.writer.remove(document, frequencies);
      this.writer.applyFrequencies(frequencies);
      return true;
    });
  }

  /** Deletes every document of a collection; returns how many were removed. */
  removeCollection(collection: string): number {
    const { byCollection, documents } = this.databases;
    let removed = 0;
    for (;;) {
      // Bounded batches keep each write transaction short.
      const ids = Array.from(byCollection.getKeys({ start: `${collection}\u0000`, end: `${collection}\u0001`, limit: 100 }), (key) =>
        key.slice(collection.length + 1),
      );
      if (ids.length === 0) return removed;
      removed += this.storage.root.transactionSync(() => {
        let count = 0;
        const frequencies = new Map<string, number>();
        for (const id of ids) {
          const document = documents.get(id);
          if (document) {
            this.writer.remove(document, frequencies);
            count += 1;
          } else byCollection.remove(`${collection}\u0000${id}`);
        }
        this.writer.applyFrequencies(frequencies);
        return count;
      });
    }
  }

  /** Documents ordered by id, optionally within one collection, `limit` at a time after `after`. */
  list(options: { collection?: string; limit: number; after?: string }): DocumentSummary[] {
    const { collection, limit, after } = options;
    const { byCollection, documents } = this.databases;
    if (collection !== undefined) {
      const start = `${collection}\u0000${after ? `${after}\u0000` : ''}`;
      const ids = Array.from(byCollection.getKeys({ start, end: `${collection}\u0001`, limit }), (key) => key.slice(collection.length + 1));
      return ids
        .map((id) => documents.get(id))
        .filter((record): record is DocumentRecord => record !== undefined)
        .map(summarise);
    }
    const start = after ? `${after}\u0000` : undefined;
    return Array.from(documents.getRange({ start, limit }), ({ value }) => summarise(value));
  }

  /** Every collection with its counts. */
  collections(): CollectionSummary[] {
    return Array.from(this.databases.collections.getRange({ limit: 10_000 }), ({ key, value }) => ({
      name: key,
      documents: value.documents,
      chunks: value.chunks,
    }));
  }

  /** Top-k passages for a query (BM25, fused with vector similarity when embeddings are on). */
  async retrieve(query: string, options: { topK: number; collection?: string }, signal?: AbortSignal): Promise<Passage[]> {
    const started = performance.now();
    const passages = await retrievePassages(this.retrieval, query, options, signal);
    const elapsedMs = performance.now() - started;
    this.options.observeRetrieval?.(elapsedMs / 1000);
    this.counters.record(passages.length > 0, elapsedMs);
    return passages;
  }

  /** Adds the in-memory counters to the stored ones in one transaction (safe across processes). */
  flushCounters(): void {
    this.counters.flush();
  }

  /** Writes pending counters; call before the storage closes. */
  close(): void {
    this.counters.close();
  }

  /** The figures of GET /api/chat/rag/stats. */
  stats(): RagStats {
    const retriever: RagStats['retriever'] = { kind: this.kind };
    if (this.options.embedder) retriever.embedding_model = this.options.embedder.model;
    return ragStats(this.databases, this.counters, retriever);
  }
}
