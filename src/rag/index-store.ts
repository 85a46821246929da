/**
 * The knowledge base's storage layout: its LMDB sub-databases, the records they hold, and the ids
 * and summaries derived from those records.
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
 */
import { createHash } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { DocumentFormat } from './extract.js';

export const DEFAULT_COLLECTION = 'default';
/** Collection names are path- and key-safe. */
export const COLLECTION_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

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

export interface CorpusRecord {
  documents: number;
  chunks: number;
  total_length: number;
  last_indexed: string | null;
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

/** The knowledge base's sub-databases, opened once per storage. */
export interface RagDatabases {
  documents: Database<DocumentRecord, string>;
  byCollection: Database<number, string>;
  collections: Database<CollectionRecord, string>;
  chunks: Database<ChunkRecord, string>;
  postings: Database<[number, number], string>;
  terms: Database<number, string>;
  vectors: Database<Buffer, string>;
  meta: Database<unknown, string>;
}

const EMPTY_CORPUS: CorpusRecord = { documents: 0, chunks: 0, total_length: 0, last_indexed: null };

/** Opens (creating when absent) every sub-database of the knowledge base in `root`. */
export function openRagDatabases(root: RootDatabase): RagDatabases {
  return {
    documents: root.openDB<DocumentRecord, string>({ name: 'rag-documents' }),
    byCollection: root.openDB<number, string>({ name: 'rag-by-coll' }),
    collections: root.openDB<CollectionRecord, string>({ name: 'rag-collections' }),
    chunks: root.openDB<ChunkRecord, string>({ name: 'rag-chunks' }),
    postings: root.openDB<[number, number], string>({ name: 'rag-postings' }),
    terms: root.openDB<number, string>({ name: 'rag-terms' }),
    vectors: root.openDB<Buffer, string>({ name: 'rag-vectors', encoding: 'binary' }),
    meta: root.openDB<unknown, string>({ name: 'rag-meta' }),
  };
}

/** The corpus totals kept in rag-meta (zeros for an empty index). */
export function readCorpus(databases: RagDatabases): CorpusRecord {
  return (databases.meta.get('corpus') as CorpusRecord | undefined) ?? EMPTY_CORPUS;
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
    indexed_at: record.indexed_at,
  };
  if (record.url !== undefined) summary.url = record.url;
  return summary;
}
