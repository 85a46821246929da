/**
 * The knowledge base on LMDB, the embedded default engine: the segmented index of index-store.ts,
 * written by ingestion.ts, merged by merge.ts, read by retrieval.ts, with the counters of
 * retrieval-stats.ts. An index of an earlier layout is moved over when it is opened (migrate.ts).
 */
import type { LmdbStorage } from '../store/lmdb.js';
import type { BackendOptions, ExportedChunk, ExportedDocument, IndexBackend, IndexFigures } from './backend.js';
import {
  INDEX_VERSION,
  openRagDatabases,
  readCorpus,
  vectorKey,
  type CollectionSummary,
  type DocumentRecord,
  type RagDatabases,
} from './index-store.js';
import { IndexWriter, type DocumentToWrite, type IngestResult, type WriteCounters } from './ingestion.js';
import { SegmentMerger } from './merge.js';
import { migrateLegacyIndex } from './migrate.js';
import type { ChunkOptions } from './prepare.js';
import { retrievePassages, type RetrievalContext } from './retrieval.js';
import { RetrievalCounters, indexBytes } from './retrieval-stats.js';
import type { Passage } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in LMDB. */
export class LmdbIndex implements IndexBackend {
  private readonly databases: RagDatabases;
  private readonly writer: IndexWriter;
  private readonly merger: SegmentMerger;
  private readonly retrieval: RetrievalContext;
  private readonly counters: RetrievalCounters;
  private readonly chunkOptions: ChunkOptions;
  private readonly ready: Promise<void>;

  constructor(
    private readonly storage: LmdbStorage,
    private readonly options: BackendOptions,
  ) {
    this.databases = openRagDatabases(storage.root);
    const { meta } = this.databases;
    // The stop-word setting decides which postings exist, so it is fixed at index creation.
    const settings = meta.get('settings') as { stop_words: boolean } | undefined;
    let stopWords: boolean;
    if (settings) stopWords = settings.stop_words;
    else {
      stopWords = options.chunkOptions.stopWords;
      meta.putSync('settings', { stop_words: stopWords });
    }
    this.chunkOptions = { ...options.chunkOptions, stopWords };
    this.writer = new IndexWriter(storage.root, this.databases);
    this.merger = new SegmentMerger(this.databases, this.writer, yieldToEventLoop, options.logger);
    this.retrieval = {
      databases: this.databases,
      stopWords,
      minScore: options.minScore,
      scanLimit: options.scanLimit,
      embedder: options.embedder,
      logger: options.logger,
      pendingTerms: new Map(),
      directories: new Map(),
    };
    this.counters = new RetrievalCounters(storage.root, this.databases, options.statsFlushMs ?? 250);
    this.merger.recover();
    this.ready = this.upgrade().then(() => this.merger.schedule());
  }

  async open(): Promise<ChunkOptions> {
    await this.ready;
    return this.chunkOptions;
  }

  private async upgrade(): Promise<void> {
    const { meta } = this.databases;
    if (meta.get('index_version') === INDEX_VERSION) return;
    await migrateLegacyIndex(this.storage.root, this.databases, this.writer, this.chunkOptions, this.options.logger);
    meta.putSync('index_version', INDEX_VERSION);
  }

  get writeCounters(): Readonly<WriteCounters> {
    return this.writer.counters;
  }

  get mergedPostings(): number {
    return this.merger.copiedPostings;
  }

  write(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<IngestResult[]> {
    return this.writer.write(documents, yieldBetween);
  }

  afterWrite(): void {
    this.merger.schedule();
  }

  async segmentCounts(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const { value } of this.databases.segments.getRange()) counts[value.state] = (counts[value.state] ?? 0) + 1;
    return counts;
  }

  async hasCollection(name: string): Promise<boolean> {
    return this.databases.collections.get(name) !== undefined;
  }

  async get(documentId: string): Promise<DocumentRecord | undefined> {
    return this.databases.documents.get(documentId);
  }

  async remove(documentId: string, collection?: string): Promise<boolean> {
    return this.writer.transaction(() => {
      const document = this.databases.documents.get(documentId);
      if (!document || (collection !== undefined && document.collection !== collection)) return false;
      const frequencies = new Map<string, number>();
      this.writer.remove(document, frequencies);
      this.writer.applyFrequencies(frequencies);
      return true;
    });
  }

  async removeCollection(collection: string): Promise<number> {
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

  async list(options: { collection?: string | undefined; limit: number; after?: string | undefined }): Promise<DocumentRecord[]> {
    const { collection, limit, after } = options;
    const { byCollection, documents } = this.databases;
    if (collection !== undefined) {
      const start = `${collection}\u0000${after ? `${after}\u0000` : ''}`;
      const ids = Array.from(byCollection.getKeys({ start, end: `${collection}\u0001`, limit }), (key) => key.slice(collection.length + 1));
      return ids.map((id) => documents.get(id)).filter((record): record is DocumentRecord => record !== undefined);
    }
    const start = after ? `${after}\u0000` : undefined;
    return Array.from(documents.getRange({ start, limit }), ({ value }) => value);
  }

  async collections(): Promise<CollectionSummary[]> {
    return Array.from(this.databases.collections.getRange({ limit: 10_000 }), ({ key, value }) => ({
      name: key,
      documents: value.documents,
      chunks: value.chunks,
    }));
  }

  async retrieve(query: string, options: { topK: number; collection?: string | undefined }, signal?: CancelSignal): Promise<Passage[]> {
    await this.ready;
    const { collection, topK } = options;
    return retrievePassages(this.retrieval, query, collection === undefined ? { topK } : { topK, collection }, signal);
  }

  recordRetrieval(hit: boolean, elapsedMs: number): void {
    this.counters.record(hit, elapsedMs);
  }

  async flushCounters(): Promise<void> {
    this.counters.flush();
  }

  async figures(): Promise<IndexFigures> {
    const corpus = readCorpus(this.databases);
    const { queries, hits, total_ms } = this.counters.totals();
    return {
      documents: corpus.documents,
      chunks: corpus.chunks,
      collections: this.databases.collections.getCount(),
      index_bytes: indexBytes(this.databases),
      last_indexed: corpus.last_indexed,
      queries,
      hits,
      total_ms,
    };
  }

  async *exportDocuments(): AsyncIterable<ExportedDocument> {
    const { documents, chunks, vectors, meta } = this.databases;
    for (const { value: record } of documents.getRange()) {
      const code = meta.get(`code:${record.collection}`) as string | undefined;
      const exported: ExportedChunk[] = [];
      for (let number = record.first_chunk; number < record.first_chunk + record.chunks; number += 1) {
        const chunk = chunks.get(number);
        if (!chunk) continue;
        const vector = code === undefined ? undefined : vectors.get(vectorKey(code, number));
        exported.push({
          text: chunk.text,
          ...(chunk.page !== undefined ? { page: chunk.page } : {}),
          ...(vector ? { vector: Array.from(new Float32Array(Uint8Array.from(vector).buffer)) } : {}),
        });
      }
      yield { record, chunks: exported };
    }
  }

  async settle(): Promise<void> {
    await this.ready;
    await this.merger.idle();
  }

  async close(): Promise<void> {
    await this.ready;
    await this.merger.close();
    this.counters.close();
  }
}
