/**
 * The knowledge base: documents in named collections, cut into chunks, indexed for BM25 in LMDB
 * (and for vector search when an embeddings upstream is configured), plus retrieval statistics.
 * This class is the one entry point; the work lives in extract-sections.ts and prepare.ts (run in
 * the worker pool), ingestion.ts (segments written and documents removed), merge.ts (background
 * merges), index-store.ts (layout and records), retrieval.ts (ranking) and retrieval-stats.ts.
 *
 * A document goes through four stages, reported to whoever asks (the NDJSON upload, the command
 * line): extracting and chunking in a worker thread, indexing on the main thread in short
 * transactions, done. Documents ready at the same time are written together as one segment
 * (write-queue.ts).
 */
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LmdbStorage } from '../store/lmdb.js';
import type { Embedder } from './embeddings.js';
import type { DocumentFormat } from './extract.js';
import {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  INDEX_VERSION,
  documentIdFor,
  openRagDatabases,
  summarise,
  type CollectionSummary,
  type DocumentRecord,
  type DocumentSummary,
  type RagDatabases,
} from './index-store.js';
import { IndexWriter, type DocumentToWrite, type IngestResult, type WriteCounters } from './ingestion.js';
import { SegmentMerger } from './merge.js';
import { migrateLegacyIndex } from './migrate.js';
import type { ChunkOptions } from './prepare.js';
import { retrievePassages, type RetrievalContext } from './retrieval.js';
import { RetrievalCounters, ragStats, type RagStats } from './retrieval-stats.js';
import type { Passage, Retriever } from './types.js';
import { createPreparer, defaultIngestThreads, type Preparer } from './worker-pool.js';
import { WriteQueue } from './write-queue.js';

export {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  type CollectionSummary,
  type DocumentSummary,
} from './index-store.js';
export type { IngestResult } from './ingestion.js';
export type { RagStats } from './retrieval-stats.js';

/** Text (or file bytes) of the documents addMany has in progress at once, at most. */
const IN_FLIGHT_BYTES = 64 * 1024 * 1024;

export interface DocumentInput {
  title: string;
  /** The document's content: text in `format` (plain text by default), or a file's bytes (PDF, Word). */
  text: string | Uint8Array;
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
  /** How the document is named in errors (a file name); default: its title. */
  name?: string | undefined;
}

/** Where one document is: the stages of NDJSON upload progress. */
export type IngestStage = 'extracting' | 'chunking' | 'indexing';

/** One document's outcome in a batch. */
export type IngestOutcome = { ok: true; result: IngestResult } | { ok: false; error: ApiError };

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
  /** Worker threads that extract and chunk (0: in-process); default from the core count. */
  threads?: number;
  /** Largest text extracted from one document, in bytes (rag.max_extracted_bytes). */
  maxTextBytes?: number;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in LMDB. */
export class KnowledgeBase implements Retriever {
  private readonly databases: RagDatabases;
  private readonly writer: IndexWriter;
  private readonly merger: SegmentMerger;
  private readonly preparer: Preparer;
  private readonly retrieval: RetrievalContext;
  private readonly counters: RetrievalCounters;
  private readonly chunkOptions: ChunkOptions;
  private readonly writes: WriteQueue;
  private closed = false;

  constructor(
    private readonly storage: LmdbStorage,
    private readonly options: KnowledgeBaseOptions,
  ) {
    this.databases = openRagDatabases(storage.root);
    const { meta } = this.databases;
    // The stop-word setting decides which postings exist, so it is fixed at index creation.
    const settings = meta.get('settings') as { stop_words: boolean } | undefined;
    let stopWords: boolean;
    if (settings) stopWords = settings.stop_words;
    else {
      stopWords = options.stopWords ?? true;
      meta.putSync('settings', { stop_words: stopWords });
    }
    this.chunkOptions = {
      chunkSize: options.chunkSize,
      chunkOverlap: options.chunkOverlap,
      stopWords,
      maxTextBytes: options.maxTextBytes ?? 16 * 1024 * 1024,
    };
    this.writer = new IndexWriter(storage.root, this.databases);
    this.merger = new SegmentMerger(this.databases, this.writer, yieldToEventLoop, options.logger);
    this.writes = new WriteQueue(this.writer, yieldToEventLoop, () => this.merger.schedule());
    this.preparer = createPreparer(options.threads ?? defaultIngestThreads());
    this.retrieval = {
      databases: this.databases,
      stopWords,
      minScore: options.minScore,
      scanLimit: options.scanLimit,
      embedder: options.embedder,
      logger: options.logger,
      pendingTerms: new Map(),
    };
    this.counters = new RetrievalCounters(storage.root, this.databases, options.statsFlushMs ?? 250);
    this.merger.recover();
    this.ready = this.upgrade().then(() => this.merger.schedule());
  }

  /** Resolves once an index of an earlier layout has been moved over (at once for any other). */
  readonly ready: Promise<void>;

  private async upgrade(): Promise<void> {
    const { meta } = this.databases;
    if (meta.get('index_version') === INDEX_VERSION) return;
    await migrateLegacyIndex(this.storage.root, this.databases, this.writer, this.chunkOptions, this.options.logger);
    meta.putSync('index_version', INDEX_VERSION);
  }

  /** The retriever kind reported in stats. */
  get kind(): 'bm25' | 'hybrid' {
    return this.options.embedder ? 'hybrid' : 'bm25';
  }

  /** Storage work done by ingestion in this process (keys written, transactions). */
  get writeCounters(): Readonly<WriteCounters> {
    return this.writer.counters;
  }

  /** Segments of the lexical index by state (the bench and tests watch merges with it). */
  segmentCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const { value } of this.databases.segments.getRange()) counts[value.state] = (counts[value.state] ?? 0) + 1;
    return counts;
  }

  /** Postings copied by background merges in this process. */
  get mergedPostings(): number {
    return this.merger.copiedPostings;
  }

  /**
   * Extracts, chunks, embeds (when configured) and indexes one document, replacing an earlier
   * version. Throws the catalogue error that stopped it; nothing of a failed document stays.
   */
  async add(input: DocumentInput, signal?: AbortSignal, onStage?: (stage: IngestStage) => void): Promise<IngestResult> {
    const collection = input.collection ?? DEFAULT_COLLECTION;
    if (!COLLECTION_PATTERN.test(collection)) {
      throw new ApiError('invalid_request', undefined, {
        details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }],
      });
    }
    await this.ready;
    return this.writes.add(() => this.prepare(input, collection, signal, onStage));
  }

  /** Extraction and chunking in the worker pool, embedding when configured: a document ready to write. */
  private async prepare(
    input: DocumentInput,
    collection: string,
    signal: AbortSignal | undefined,
    onStage: ((stage: IngestStage) => void) | undefined,
  ): Promise<DocumentToWrite> {
    const format = input.format ?? 'text';
    const name = input.name ?? (input.title.trim() || input.defaultTitle || 'The document');
    onStage?.('extracting');
    const extracted = await this.preparer.extract({ content: input.text, format, name }, signal);
    if (!extracted.ok) throw new ApiError(extracted.code, extracted.message, { details: extracted.details });
    onStage?.('chunking');
    const prepared = await this.preparer.chunk({ ...this.chunkOptions, sections: extracted.sections, title: extracted.title }, signal);
    if (!prepared.ok) throw new ApiError(prepared.code, prepared.message, { details: prepared.details });
    const content = prepared.content;
    const vectors = this.options.embedder ? await this.options.embedder.embed(content.texts, signal) : undefined;
    signal?.throwIfAborted();
    onStage?.('indexing');
    const title = input.title.trim() || content.title || input.defaultTitle || 'Untitled';
    const key = input.key ?? input.url ?? title;
    return {
      id: documentIdFor(collection, key),
      key,
      title,
      url: input.url,
      collection,
      format,
      content,
      vectors,
      pages: extracted.pages,
    };
  }

  /**
   * Indexes many documents, `concurrency` at a time; each stands alone (one failing does not stop
   * the others). Documents ready together are written as one segment. `onProgress` hears every
   * stage and every outcome, with the input's index.
   */
  async addMany(
    inputs: readonly DocumentInput[],
    options: {
      /** Documents in progress at once, at most (default 4096); they are bounded by size too (IN_FLIGHT_BYTES). */
      concurrency?: number;
      onStage?: (index: number, stage: IngestStage) => void;
      onOutcome?: (index: number, outcome: IngestOutcome) => void;
      signal?: AbortSignal;
    } = {},
  ): Promise<IngestOutcome[]> {
    const outcomes: IngestOutcome[] = new Array(inputs.length);
    const limit = Math.max(1, options.concurrency ?? 4096);
    let next = 0;
    let running = 0;
    let bytes = 0;
    return new Promise<IngestOutcome[]>((resolve, reject) => {
      let failed = false;
      const start = () => {
        // Many small documents in flight make large segments; a few large ones are bounded by size.
        while (!failed && next < inputs.length && running < limit && (running === 0 || bytes < IN_FLIGHT_BYTES)) {
          const index = next;
          next += 1;
          const input = inputs[index] as DocumentInput;
          const size = typeof input.text === 'string' ? input.text.length : input.text.byteLength;
          running += 1;
          bytes += size;
          this.add(input, options.signal, (stage) => options.onStage?.(index, stage)).then(
            (result) => settle(index, size, { ok: true, result }),
            (error: unknown) => {
              if (!(error instanceof ApiError) || options.signal?.aborted) {
                failed = true;
                reject(error);
                return;
              }
              settle(index, size, { ok: false, error });
            },
          );
        }
        if (running === 0 && next >= inputs.length && !failed) resolve(outcomes);
      };
      const settle = (index: number, size: number, outcome: IngestOutcome) => {
        running -= 1;
        bytes -= size;
        outcomes[index] = outcome;
        options.onOutcome?.(index, outcome);
        start();
      };
      start();
    });
  }

  /** Resolves when background merges and clean-up have finished (tests, benches). */
  async settle(): Promise<void> {
    await this.ready;
    await this.writes.idle();
    await this.merger.idle();
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
    return this.writer.transaction(() => {
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
      removed += this.writer.transaction(() => {
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
    await this.ready;
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

  /** Finishes queued writes, stops merging (resumed at the next start), writes pending counters and stops the worker threads. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.ready;
    await this.writes.close();
    await this.merger.close();
    this.counters.close();
    await this.preparer.close();
  }

  /** The figures of GET /api/chat/rag/stats. */
  stats(): RagStats {
    const retriever: RagStats['retriever'] = { kind: this.kind };
    if (this.options.embedder) retriever.embedding_model = this.options.embedder.model;
    return ragStats(this.databases, this.counters, retriever);
  }
}
