/**
 * The knowledge base's storage layout: its LMDB sub-databases, the records they hold, and the ids
 * and summaries derived from those records.
 *
 * The lexical index is segmented, so adding documents appends instead of rewriting: each write
 * creates a segment (one document, or a batch of them), and a segment keeps one posting block per
 * term (postings.ts), packed in term order into pages (pages.ts). Keys lead with the segment, so a
 * new segment's pages are written at the end of the tree and cost the same whatever the index
 * already holds. A background merge (merge.ts) folds segments of a size tier into one, dropping
 * the postings of deleted chunks, so a term is read from a bounded number of blocks.
 *
 * Layout (one sub-database each, all in the service's single LMDB environment):
 *   rag-docs         document_id → DocumentRecord
 *   rag-doc-terms    `${segment key}\0${document_id}` → the document's terms and how many of its chunks hold each
 *                    (so deleting it corrects document frequencies without re-reading its text)
 *   rag-by-coll      `${collection}\0${document_id}` → 1 (lists a collection without a full scan)
 *   rag-collections  name → {documents, chunks, code} (only collections that hold documents)
 *   rag-chunk-text   chunk number → ChunkRecord (text, token length, page)
 *   rag-segments     segment key → SegmentRecord
 *   rag-blocks       `${segment key}\1${page number}` → a page of posting blocks (binary, pages.ts);
 *                    segments written before pages keep one key per term, `${segment key}\0${term}`
 *   rag-dead         chunk number → 1: deleted chunks whose postings a segment may still hold
 *   rag-df           term → document frequency in live chunks (exact)
 *   rag-vecs         `${collection code}\0${chunk number}` → Float32 vector bytes (embeddings only)
 *   rag-meta         corpus totals, sequences, collection codes (`code:${name}`), page directories
 *                    (`segment_pages:${segment key}`), persisted query counters, index settings
 */
import { createHash } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { DocumentFormat } from './extract.js';

export const DEFAULT_COLLECTION = 'default';
/** Collection names are path- and key-safe. */
export const COLLECTION_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Version of this layout, kept in rag-meta. */
export const INDEX_VERSION = 2;

export interface DocumentRecord {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  chunks: number;
  /** Number of its first chunk; its chunks are numbered consecutively. */
  first_chunk: number;
  /** Its key in rag-doc-terms. */
  terms_key: string;
  chars: number;
  format: DocumentFormat;
  /** Pages of a PDF. */
  pages?: number;
  indexed_at: string;
}

/** The terms of a document: `terms` joined by "\n", `counts[i]` = its chunks that hold terms[i]. */
export interface DocumentTerms {
  terms: string;
  counts: number[];
}

/** An unpublished segment's terms (`terms` joined by "\n", sorted) and counts (u32 little-endian, one per term). */
export interface SegmentTerms {
  terms: string;
  counts: Buffer;
}

/** The count of term `index` in a SegmentTerms record. */
export function segmentTermCount(record: SegmentTerms, index: number): number {
  return record.counts.readUInt32LE(index * 4);
}

export interface DocumentSummary {
  document_id: string;
  title: string;
  url?: string;
  collection: string;
  chunks: number;
  chars: number;
  format: DocumentFormat;
  pages?: number;
  indexed_at: string;
}

export interface ChunkRecord {
  document_id: string;
  ordinal: number;
  text: string;
  /** Token count, the BM25 document length. */
  length: number;
  page?: number;
}

/**
 * A segment of the lexical index. `building` segments are being written and are not searched;
 * `live` ones are; `merging` ones are searched while a merge copies them; `retired` ones wait for
 * their blocks (and, for an abandoned ingestion, their chunks) to be removed.
 */
export interface SegmentRecord {
  state: 'building' | 'live' | 'merging' | 'retired' | 'abandoned';
  /** Why it was made: an ingestion owns its chunks, a merge only its blocks. */
  origin: 'ingest' | 'merge';
  /** Collection code. */
  code: string;
  /** Number of the first chunk; block entries hold chunk numbers relative to it. */
  first_chunk: number;
  /** Chunk numbers it may hold: first_chunk to first_chunk + span - 1. */
  span: number;
  /** Postings it holds (dead ones included until a merge drops them). */
  postings: number;
  /** Process that writes or merges it, so a crashed one's work can be recognised. */
  pid: number;
  /**
   * Of an unpublished ingestion: how many of its terms (rag-meta `segment_terms:${key}`, sorted)
   * already count in rag-df. Readers subtract them, so document frequencies stay exact.
   */
  df_applied?: number;
}

export interface CorpusRecord {
  documents: number;
  chunks: number;
  total_length: number;
  last_indexed: string | null;
}

export interface CollectionRecord {
  documents: number;
  chunks: number;
}

export interface CollectionSummary {
  name: string;
  documents: number;
  chunks: number;
}

/** The knowledge base's sub-databases, opened once per storage. */
export interface RagDatabases {
  documents: Database<DocumentRecord, string>;
  documentTerms: Database<DocumentTerms, string>;
  byCollection: Database<number, string>;
  collections: Database<CollectionRecord, string>;
  chunks: Database<ChunkRecord, number>;
  segments: Database<SegmentRecord, string>;
  blocks: Database<Buffer, string>;
  dead: Database<number, number>;
  df: Database<number, string>;
  vectors: Database<Buffer, string>;
  meta: Database<unknown, string>;
}

const EMPTY_CORPUS: CorpusRecord = { documents: 0, chunks: 0, total_length: 0, last_indexed: null };

/** Opens (creating when absent) every sub-database of the knowledge base in `root`. */
export function openRagDatabases(root: RootDatabase): RagDatabases {
  return {
    documents: root.openDB<DocumentRecord, string>({ name: 'rag-docs' }),
    documentTerms: root.openDB<DocumentTerms, string>({ name: 'rag-doc-terms' }),
    byCollection: root.openDB<number, string>({ name: 'rag-by-coll' }),
    collections: root.openDB<CollectionRecord, string>({ name: 'rag-collections' }),
    chunks: root.openDB<ChunkRecord, number>({ name: 'rag-chunk-text' }),
    segments: root.openDB<SegmentRecord, string>({ name: 'rag-segments' }),
    blocks: root.openDB<Buffer, string>({ name: 'rag-blocks', encoding: 'binary' }),
    dead: root.openDB<number, number>({ name: 'rag-dead' }),
    df: root.openDB<number, string>({ name: 'rag-df' }),
    vectors: root.openDB<Buffer, string>({ name: 'rag-vecs', encoding: 'binary' }),
    meta: root.openDB<unknown, string>({ name: 'rag-meta' }),
  };
}

/** The corpus totals kept in rag-meta (zeros for an empty index). */
export function readCorpus(databases: RagDatabases): CorpusRecord {
  return (databases.meta.get('corpus') as CorpusRecord | undefined) ?? EMPTY_CORPUS;
}

/** The key of a block: segment first, so a segment's blocks are contiguous and appended. */
export function blockKey(segment: string, term: string): string {
  return `${segment}\u0000${term}`;
}

/** The rag-meta key of a segment's page directory (pages.ts): its pages' first terms, joined by '\n'. */
export function pageDirectoryKey(segment: string): string {
  return `segment_pages:${segment}`;
}

/** The rag-doc-terms key of a document written in `segment` (written before it is published, so keyed apart from an earlier version's). */
export function documentTermsKey(segment: string, documentId: string): string {
  return `${segment}\u0000${documentId}`;
}

/** The rag-meta key of an unpublished segment's terms and document frequencies. */
export function segmentTermsKey(segment: string): string {
  return `segment_terms:${segment}`;
}

/** A segment key from its sequence number: fixed width, so keys sort in the order segments were made. */
export function segmentKeyFor(sequence: number): string {
  return sequence.toString(36).padStart(8, '0');
}

/** The vector key of a chunk. */
export function vectorKey(code: string, chunk: number): string {
  return `${code}\u0000${chunk}`;
}

/** The id of a document from its collection and identity key. */
export function documentIdFor(collection: string, key: string): string {
  return `doc_${createHash('sha256').update(`${collection}\u0000${key}`).digest('hex').slice(0, 24)}`;
}

/** The public id of a chunk (Passage.chunkId): its document and position. */
export function chunkIdFor(documentId: string, ordinal: number): string {
  return `${documentId}-${ordinal}`;
}

/** The public view of a stored document. */
export function summarise(record: DocumentRecord): DocumentSummary {
  const summary: DocumentSummary = {
    document_id: record.id,
    title: record.title,
    collection: record.collection,
    chunks: record.chunks,
    chars: record.chars,
    format: record.format,
    indexed_at: record.indexed_at,
  };
  if (record.url !== undefined) summary.url = record.url;
  if (record.pages !== undefined) summary.pages = record.pages;
  return summary;
}
