/**
 * The storage side of the knowledge base: what KnowledgeBase (knowledge-base.ts, the shared front
 * that validates, extracts, chunks and embeds) asks of an engine. LmdbIndex (lmdb-index.ts) and
 * RedisIndex (redis-index.ts) implement it on the same design (segments written invisibly and
 * published at once, tombstones, exact document frequencies, background merges) and feed the same
 * BM25 code (bm25.ts) with the same figures, so both rank alike.
 */
import type { Embedder } from './embeddings.js';
import type { CollectionSummary, DocumentRecord } from './index-store.js';
import type { DocumentToWrite, IngestResult, WriteCounters } from './ingestion.js';
import type { ChunkOptions } from './prepare.js';
import type { Passage } from './types.js';
import type { Logger } from '../logger.js';
import type { CancelSignal } from '../domain/cancel.js';

/** How an engine ranks and where it reports. */
export interface BackendOptions {
  /** Chunking of a new index; its stop-word setting is fixed when the index is first created. */
  chunkOptions: ChunkOptions;
  /** Passages below this score (BM25, or cosine similarity for vector hits) are not returned. */
  minScore: number;
  /** Posting-list length above which a term is only looked up, not scanned (bm25.ts SCAN_LIMIT). */
  scanLimit?: number | undefined;
  embedder?: Embedder | undefined;
  logger?: Logger | undefined;
  /** How long query counters may stay in memory before they are written (ms), where an engine batches them. */
  statsFlushMs?: number | undefined;
}

/** The stored figures behind GET /api/chat/rag/stats. */
export interface IndexFigures {
  documents: number;
  chunks: number;
  collections: number;
  index_bytes: number;
  last_indexed: string | null;
  queries: number;
  hits: number;
  total_ms: number;
}

/** One chunk of an exported document, as it was indexed. */
export interface ExportedChunk {
  text: string;
  page?: number;
  vector?: number[];
}

/** Everything needed to rebuild a document exactly on any engine: its record and its chunks in order. */
export interface ExportedDocument {
  record: DocumentRecord;
  chunks: ExportedChunk[];
}

/** A storage engine of the knowledge base. */
export interface IndexBackend {
  /**
   * Opens the index (moving an earlier layout over where the engine has one) and answers the
   * chunking in force: the stop-word setting stored at creation wins over the configured one.
   * May be called again after it failed (an unreachable server).
   */
  open(): Promise<ChunkOptions>;
  /** Writes documents of one collection as one segment, visible entirely or not at all, replacing earlier versions. */
  write(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<IngestResult[]>;
  /** Called after each write: the cue for background merges. */
  afterWrite(): void;
  get(documentId: string): Promise<DocumentRecord | undefined>;
  /** Documents ordered by id, optionally within one collection, `limit` at a time after `after`. */
  list(options: { collection?: string | undefined; limit: number; after?: string | undefined }): Promise<DocumentRecord[]>;
  collections(): Promise<CollectionSummary[]>;
  hasCollection(name: string): Promise<boolean>;
  /** Deletes a document; false when no such document (in that collection, when one is named). */
  remove(documentId: string, collection?: string): Promise<boolean>;
  /** Deletes every document of a collection; returns how many were removed. */
  removeCollection(collection: string): Promise<number>;
  /** Top-k passages for a query (BM25, fused with vector similarity when embeddings are on). */
  retrieve(query: string, options: { topK: number; collection?: string | undefined }, signal?: CancelSignal): Promise<Passage[]>;
  /** Counts one retrieval in the shared statistics. */
  recordRetrieval(hit: boolean, elapsedMs: number): void;
  /** Writes counters this process still holds. */
  flushCounters(): Promise<void>;
  figures(): Promise<IndexFigures>;
  /** Segments of the lexical index by state. */
  segmentCounts(): Promise<Record<string, number>>;
  /** Every document with its chunks (and vectors), ordered by id. */
  exportDocuments(): AsyncIterable<ExportedDocument>;
  /** Storage work done by writes in this process. */
  readonly writeCounters: Readonly<WriteCounters>;
  /** Postings copied by background merges in this process. */
  readonly mergedPostings: number;
  /** Resolves when background merges and clean-up have finished. */
  settle(): Promise<void>;
  /** Stops merging and writes pending counters. */
  close(): Promise<void>;
}
