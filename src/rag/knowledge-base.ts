/**
 * The knowledge base: documents in named collections, cut into chunks, indexed for BM25 (and for
 * vector search when an embeddings upstream is configured), plus retrieval statistics. This class
 * is the one entry point and the part every storage engine shares: it validates, extracts and
 * chunks in the worker pool (extract-sections.ts, prepare.ts), embeds, and hands prepared
 * documents to an engine (backend.ts): LmdbIndex (lmdb-index.ts) or RedisIndex (redis-index.ts),
 * which store, rank (retrieval.ts, bm25.ts) and count (retrieval-stats.ts) alike.
 *
 * A document goes through four stages, reported to whoever asks (the NDJSON upload, the command
 * line): extracting and chunking in a worker thread, indexing, done. Documents ready at the same
 * time are written together as one segment (write-queue.ts).
 */
import { ApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LmdbStorage } from '../store/lmdb.js';
import type { RedisStorage } from '../store/redis.js';
import type { BackendOptions, ExportedDocument, IndexBackend } from './backend.js';
import type { Embedder } from './embeddings.js';
import type { DocumentFormat } from './extract.js';
import {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  documentIdFor,
  summarise,
  type CollectionSummary,
  type DocumentSummary,
} from './index-store.js';
import type { DocumentToWrite, IngestResult, WriteCounters } from './ingestion.js';
import { LmdbIndex } from './lmdb-index.js';
import { buildPostings } from './postings.js';
import type { ChunkOptions } from './prepare.js';
import { ragStats, type RagStats } from './retrieval-stats.js';
import { RedisIndex } from './redis-index.js';
import type { Passage, Retriever } from './types.js';
import { createPreparer, defaultIngestThreads, type Preparer } from './worker-pool.js';
import { WriteQueue } from './write-queue.js';
import type { CancelSignal } from '../domain/cancel.js';

export {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  type CollectionSummary,
  type DocumentSummary,
} from './index-store.js';
export type { ExportedChunk, ExportedDocument } from './backend.js';
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

/** The engine for a storage: LMDB's segmented index, or the same design on Redis. */
function backendFor(storage: LmdbStorage | RedisStorage, options: BackendOptions): IndexBackend {
  return storage.engine === 'redis' ? new RedisIndex(storage, options) : new LmdbIndex(storage, options);
}

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in LMDB or Redis. */
export class KnowledgeBase implements Retriever {
  private readonly backend: IndexBackend;
  private readonly preparer: Preparer;
  private readonly writes: WriteQueue;
  private opening: Promise<ChunkOptions> | undefined;
  private closed = false;

  constructor(
    storage: LmdbStorage | RedisStorage,
    private readonly options: KnowledgeBaseOptions,
  ) {
    this.backend = backendFor(storage, {
      chunkOptions: {
        chunkSize: options.chunkSize,
        chunkOverlap: options.chunkOverlap,
        stopWords: options.stopWords ?? true,
        maxTextBytes: options.maxTextBytes ?? 16 * 1024 * 1024,
      },
      minScore: options.minScore,
      scanLimit: options.scanLimit,
      embedder: options.embedder,
      logger: options.logger,
      statsFlushMs: options.statsFlushMs,
    });
    this.writes = new WriteQueue(this.backend, yieldToEventLoop, () => this.backend.afterWrite());
    this.preparer = createPreparer(options.threads ?? defaultIngestThreads());
    // Opened at once so a migration starts with the process; a failure is retried by the next call.
    this.chunkOptions().catch(() => undefined);
  }

  /** The chunking in force, once the index is open (opened again after a failure: Redis away at start). */
  private chunkOptions(): Promise<ChunkOptions> {
    this.opening ??= this.backend.open().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  /** Resolves once the index is open (an index of an earlier layout moved over). */
  get ready(): Promise<void> {
    return this.chunkOptions().then(() => undefined);
  }

  /** The retriever kind reported in stats. */
  get kind(): 'bm25' | 'hybrid' {
    return this.options.embedder ? 'hybrid' : 'bm25';
  }

  /** Storage work done by ingestion in this process (keys written, transactions). */
  get writeCounters(): Readonly<WriteCounters> {
    return this.backend.writeCounters;
  }

  /** Segments of the lexical index by state (the bench and tests watch merges with it). */
  segmentCounts(): Promise<Record<string, number>> {
    return this.backend.segmentCounts();
  }

  /** Postings copied by background merges in this process. */
  get mergedPostings(): number {
    return this.backend.mergedPostings;
  }

  /**
   * Extracts, chunks, embeds (when configured) and indexes one document, replacing an earlier
   * version. Throws the catalogue error that stopped it; nothing of a failed document stays.
   */
  async add(input: DocumentInput, signal?: CancelSignal, onStage?: (stage: IngestStage) => void): Promise<IngestResult> {
    const collection = input.collection ?? DEFAULT_COLLECTION;
    if (!COLLECTION_PATTERN.test(collection)) {
      throw new ApiError('invalid_request', undefined, {
        details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }],
      });
    }
    const chunkOptions = await this.chunkOptions();
    return this.writes.add(() => this.prepare(input, collection, chunkOptions, signal, onStage));
  }

  /** Extraction and chunking in the worker pool, embedding when configured: a document ready to write. */
  private async prepare(
    input: DocumentInput,
    collection: string,
    chunkOptions: ChunkOptions,
    signal: CancelSignal | undefined,
    onStage: ((stage: IngestStage) => void) | undefined,
  ): Promise<DocumentToWrite> {
    const format = input.format ?? 'text';
    const name = input.name ?? (input.title.trim() || input.defaultTitle || 'The document');
    onStage?.('extracting');
    const extracted = await this.preparer.extract({ content: input.text, format, name }, signal);
    if (!extracted.ok) throw new ApiError(extracted.code, extracted.message, { details: extracted.details });
    onStage?.('chunking');
    const prepared = await this.preparer.chunk({ ...chunkOptions, sections: extracted.sections, title: extracted.title }, signal);
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
      signal?: CancelSignal;
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
  /**
   * Indexes an exported document (exportDocuments, on this engine or another) exactly: the same
   * id, record fields and chunks, tokenised again but never re-cut, with their vectors.
   */
  async importDocument(exported: ExportedDocument): Promise<IngestResult> {
    const { record, chunks } = exported;
    if (!COLLECTION_PATTERN.test(record.collection) || chunks.length === 0) {
      throw new ApiError('invalid_request', `The exported document ${record.id} has no chunks or a bad collection.`);
    }
    const chunkOptions = await this.chunkOptions();
    const texts = chunks.map((chunk) => chunk.text);
    const paged = chunks.some((chunk) => chunk.page !== undefined);
    const { lengths, postings } = buildPostings(texts, chunkOptions.stopWords);
    const vectors = chunks.every((chunk) => chunk.vector) ? chunks.map((chunk) => Float32Array.from(chunk.vector ?? [])) : undefined;
    const document: DocumentToWrite = {
      id: record.id,
      key: record.key,
      title: record.title,
      url: record.url,
      collection: record.collection,
      format: record.format,
      content: {
        title: record.title,
        chars: record.chars,
        texts,
        lengths,
        pages: paged ? chunks.map((chunk) => chunk.page ?? 0) : undefined,
        postings,
      },
      vectors,
      pages: record.pages,
      indexedAt: record.indexed_at,
    };
    return this.writes.add(async () => document);
  }

  /** Every document with its chunks and vectors, ordered by id: what importDocument rebuilds it from. */
  async *exportDocuments(): AsyncIterable<ExportedDocument> {
    await this.ready;
    yield* this.backend.exportDocuments();
  }

  /** Resolves when background merges and clean-up have finished (tests, benches). */
  async settle(): Promise<void> {
    await this.ready;
    await this.writes.idle();
    await this.backend.settle();
  }

  /** True when the collection holds at least one document. */
  hasCollection(name: string): Promise<boolean> {
    return this.backend.hasCollection(name);
  }

  /** One document's summary, or undefined. */
  async get(documentId: string): Promise<DocumentSummary | undefined> {
    const record = await this.backend.get(documentId);
    return record ? summarise(record) : undefined;
  }

  /** Deletes a document; false when no such document (in that collection, when one is named). */
  remove(documentId: string, collection?: string): Promise<boolean> {
    return this.backend.remove(documentId, collection);
  }

  /** Deletes every document of a collection; returns how many were removed. */
  removeCollection(collection: string): Promise<number> {
    return this.backend.removeCollection(collection);
  }

  /** Documents ordered by id, optionally within one collection, `limit` at a time after `after`. */
  async list(options: { collection?: string | undefined; limit: number; after?: string | undefined }): Promise<DocumentSummary[]> {
    return (await this.backend.list(options)).map(summarise);
  }

  /** Every collection with its counts. */
  collections(): Promise<CollectionSummary[]> {
    return this.backend.collections();
  }

  /** Top-k passages for a query (BM25, fused with vector similarity when embeddings are on). */
  async retrieve(query: string, options: { topK: number; collection?: string }, signal?: CancelSignal): Promise<Passage[]> {
    await this.ready;
    const started = performance.now();
    const passages = await this.backend.retrieve(query, options, signal);
    const elapsedMs = performance.now() - started;
    this.options.observeRetrieval?.(elapsedMs / 1000);
    this.backend.recordRetrieval(passages.length > 0, elapsedMs);
    return passages;
  }

  /** Writes the counters this process still holds (safe across processes). */
  flushCounters(): Promise<void> {
    return this.backend.flushCounters();
  }

  /** Finishes queued writes, stops merging (resumed at the next start), writes pending counters and stops the worker threads. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.writes.close();
    await this.backend.close();
    await this.preparer.close();
  }

  /** The figures of GET /api/chat/rag/stats. */
  async stats(): Promise<RagStats> {
    const retriever: RagStats['retriever'] = { kind: this.kind };
    if (this.options.embedder) retriever.embedding_model = this.options.embedder.model;
    return ragStats(await this.backend.figures(), retriever);
  }
}
