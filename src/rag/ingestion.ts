/**
 * Ingestion and indexing: a document is extracted, chunked and embedded outside any transaction
 * (prepareDocument), then written into the lexical and vector indexes inside the caller's write
 * transaction (IndexWriter). Removal is the exact inverse of a write, so replacing a document
 * leaves the corpus totals and document frequencies as if the old version had never been there.
 */
import { ApiError } from '../errors.js';
import { chunkText } from './chunk.js';
import type { Embedder } from './embeddings.js';
import { extractText, type DocumentFormat } from './extract.js';
import {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  documentIdFor,
  readCorpus,
  type CorpusRecord,
  type DocumentRecord,
  type RagDatabases,
} from './index-store.js';
import { termFrequencies } from './tokenize.js';

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

/** Where the `add` of a batch is: for progress bars. */
export type ProgressListener = (done: number, total: number, result: IngestResult) => void;

/** A document ready to be written: validated, extracted, chunked and (optionally) embedded. */
export interface PreparedDocument {
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

/** How documents are cut and embedded. */
export interface PrepareOptions {
  chunkSize: number;
  chunkOverlap: number;
  embedder?: Embedder | undefined;
}

/** Validates, extracts, chunks and embeds one document; the slow part, kept outside transactions. */
export async function prepareDocument(input: DocumentInput, options: PrepareOptions, signal?: AbortSignal): Promise<PreparedDocument> {
  const collection = input.collection ?? DEFAULT_COLLECTION;
  if (!COLLECTION_PATTERN.test(collection)) {
    throw new ApiError('invalid_request', undefined, {
      details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }],
    });
  }
  const format = input.format ?? 'text';
  const extracted = extractText(input.text, format);
  if (!extracted.text.trim()) {
    throw new ApiError('invalid_request', undefined, { details: [{ path: 'text', message: 'contains no text to index' }] });
  }
  const title = input.title.trim() || extracted.title || input.defaultTitle || 'Untitled';
  const key = input.key ?? input.url ?? title;
  const id = documentIdFor(collection, key);
  const pieces = chunkText(extracted.text, { size: options.chunkSize, overlap: options.chunkOverlap });
  const vectors = options.embedder ? await options.embedder.embed(pieces, signal) : undefined;
  return { id, key, title, url: input.url, collection, format, text: extracted.text, pieces, vectors };
}

/** Writes and removes documents in the indexes; every method runs inside a write transaction. */
export class IndexWriter {
  constructor(
    private readonly databases: RagDatabases,
    /** Fixed at index creation: removal re-tokenises chunks and must produce the same terms. */
    private readonly stopWords: boolean,
  ) {}

  /**
   * Indexes a prepared document, replacing an earlier version. Document-frequency changes are
   * collected in `dfChanges` and written once per transaction by applyFrequencies (one
   * read-write per distinct term).
   */
  write(prepared: PreparedDocument, dfChanges: Map<string, number>): IngestResult {
    const { documents, byCollection, collections, chunks, postings, vectors, meta } = this.databases;
    const existing = documents.get(prepared.id);
    if (existing) this.remove(existing, dfChanges);
    const now = new Date().toISOString();
    const corpus = readCorpus(this.databases);
    const collection = collections.get(prepared.collection) ?? { documents: 0, chunks: 0, code: this.nextSequence('collection_sequence') };
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
      chunks.put(chunkId, { document_id: prepared.id, collection: prepared.collection, ordinal, text, length });
      for (const [term, tf] of frequencies) {
        postings.put(`${term}\u0000${code}\u0000${chunkId}`, [tf, length]);
        dfChanges.set(term, (dfChanges.get(term) ?? 0) + 1);
      }
      const vector = prepared.vectors?.[ordinal];
      if (vector) vectors.put(`${code}\u0000${chunkId}`, Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength));
    });
    documents.put(prepared.id, {
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
    byCollection.put(`${prepared.collection}\u0000${prepared.id}`, 1);
    collections.put(prepared.collection, { documents: collection.documents + 1, chunks: collection.chunks + prepared.pieces.length, code });
    meta.put('corpus', {
      documents: corpus.documents + 1,
      chunks: corpus.chunks + prepared.pieces.length,
      total_length: corpus.total_length + totalLength,
      last_indexed: now,
    } satisfies CorpusRecord);
    return {
      document_id: prepared.id,
      collection: prepared.collection,
      title: prepared.title,
      chunks: prepared.pieces.length,
      replaced: existing !== undefined,
    };
  }

  /** Removes a document and everything indexed for it. */
  remove(document: DocumentRecord, frequencies: Map<string, number>): void {
    const { documents, byCollection, collections, chunks, postings, vectors, meta } = this.databases;
    let removedLength = 0;
    const code = collections.get(document.collection)?.code;
    for (const chunkId of document.chunk_keys) {
      const chunk = chunks.get(chunkId);
      if (!chunk) continue;
      removedLength += chunk.length;
      for (const term of termFrequencies(chunk.text, { stopWords: this.stopWords }).keys()) {
        postings.remove(`${term}\u0000${code}\u0000${chunkId}`);
        frequencies.set(term, (frequencies.get(term) ?? 0) - 1);
      }
      chunks.remove(chunkId);
      vectors.remove(`${code}\u0000${chunkId}`);
    }
    documents.remove(document.id);
    byCollection.remove(`${document.collection}\u0000${document.id}`);
    const collection = collections.get(document.collection);
    if (collection) {
      const remaining = collection.documents - 1;
      if (remaining <= 0) collections.remove(document.collection);
      else
        collections.put(document.collection, {
          documents: remaining,
          chunks: Math.max(0, collection.chunks - document.chunks),
          code: collection.code,
        });
    }
    const corpus = readCorpus(this.databases);
    meta.put('corpus', {
      documents: Math.max(0, corpus.documents - 1),
      chunks: Math.max(0, corpus.chunks - document.chunks),
      total_length: Math.max(0, corpus.total_length - removedLength),
      last_indexed: corpus.last_indexed,
    } satisfies CorpusRecord);
  }

  /** Adds collected document-frequency changes to rag-terms. */
  applyFrequencies(frequencies: Map<string, number>): void {
    const { terms } = this.databases;
    for (const [term, change] of frequencies) {
      if (change === 0) continue;
      const frequency = (terms.get(term) ?? 0) + change;
      if (frequency > 0) terms.put(term, frequency);
      else terms.remove(term);
    }
  }

  /** The next value of a persisted counter, base 36. */
  private nextSequence(name: 'chunk_sequence' | 'collection_sequence'): string {
    const value = ((this.databases.meta.get(name) as number | undefined) ?? 0) + 1;
    this.databases.meta.put(name, value);
    return value.toString(36);
  }
}
