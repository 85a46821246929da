/**
 * Writing prepared documents into the segmented index (index-store.ts) and removing them.
 *
 * A write makes one new segment for its documents, in bounded transactions so no single commit
 * holds the storage's write lock for long: the segment is registered as `building` (invisible to
 * queries), its chunks, vectors and posting blocks go in slices, and one last transaction
 * publishes it together with the documents, their statistics and the removal of the versions
 * they replace. Readers therefore see a document entirely or not at all, and a crash leaves only a
 * `building` segment, which the next start removes. Removal tombstones a document's chunks (their
 * postings stay in their segment until a merge drops them) and corrects the statistics from the
 * document's stored term list, so BM25 figures stay exactly those of an index built from scratch.
 */
import type { RootDatabase } from 'lmdb';
import {
  documentTermsKey,
  pageDirectoryKey,
  readCorpus,
  segmentTermsKey,
  type DocumentTerms,
  type SegmentTerms,
  segmentKeyFor,
  vectorKey,
  type CorpusRecord,
  type DocumentRecord,
  type RagDatabases,
  type SegmentRecord,
} from './index-store.js';
import { ENTRY_BYTES, joinedTerms, termCount } from './postings.js';
import { PageWriter } from './pages.js';
import { copyTermBlock, type DocumentToWrite, planSegment, type SegmentPlan } from './segment-plan.js';

/** Keys written per transaction while a segment is built. */
const SLICE_WRITES = 2000;
/** Bytes of values written per transaction while a segment is built. */
const SLICE_BYTES = 256 * 1024;
/**
 * Terms whose document frequency one transaction updates (a read and a write each, on the main
 * thread inside the transaction's callback: about 2-3 ms of the event loop per slice).
 */
const DF_SLICE_TERMS = 500;

function noop(): void {}

export type { DocumentToWrite } from './segment-plan.js';

export interface IngestResult {
  document_id: string;
  collection: string;
  title: string;
  chunks: number;
  /** True when a document with the same id existed and was replaced. */
  replaced: boolean;
}

/** Storage work done by writes: keys put, for the linear-ingestion test and the bench. */
export interface WriteCounters {
  keys: number;
  transactions: number;
}

/** Writes and removes documents in the segmented index. */
export class IndexWriter {
  readonly counters: WriteCounters = { keys: 0, transactions: 0 };

  constructor(
    private readonly root: RootDatabase,
    private readonly databases: RagDatabases,
  ) {}

  /** Writes documents of one collection as one new segment, replacing earlier versions; returns one result per document. */
  async write(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<IngestResult[]> {
    if (documents.length === 0) return [];
    const { collection, chunkCount, postingCount } = segmentSize(documents);
    const plan = await planSegment(documents, yieldBetween);
    const { segment, firstChunk, code } = this.transaction(() => {
      const code = this.codeFor(collection);
      const firstChunk = this.advance('chunk_sequence', chunkCount) - chunkCount + 1;
      const segment = segmentKeyFor(this.advance('segment_sequence', 1));
      this.databases.segments.put(segment, {
        state: 'building',
        origin: 'ingest',
        code,
        first_chunk: firstChunk,
        span: chunkCount,
        postings: postingCount,
        pid: process.pid,
      } satisfies SegmentRecord);
      // The segment's document frequencies, so they can be taken back if it is never published.
      this.databases.meta.put(segmentTermsKey(segment), {
        terms: plan.terms.join('\n'),
        counts: Buffer.from(plan.counts.buffer, plan.counts.byteOffset, plan.counts.byteLength),
      } satisfies SegmentTerms);
      return { segment, firstChunk, code };
    });
    try {
      // The invisible part of the segment goes in as asynchronous puts: lmdb-js commits them on its
      // own write thread, one transaction per event turn (one slice), and the main thread only
      // encodes them. The segment is `building` until they are all committed, so nothing reads them.
      const commits: Promise<unknown>[] = [];
      for (const slice of this.segmentWrites(documents, plan, segment, firstChunk, code)) {
        commits.push(slice());
        await yieldBetween();
      }
      await Promise.all(commits);
      // Document frequencies go in slices too: readers subtract a building segment's applied share
      // (pendingFrequencies), so the figures they see stay exact throughout.
      // Each slice is an asynchronous transaction: its callback runs on the main thread, its commit
      // on lmdb-js's write thread. lmdb-js runs every callback queued before a batch starts in that
      // batch, in one event-loop turn, so the next slice is queued only once the one before it ran:
      // a batch then holds one slice, and the write thread still commits a slice while the main
      // thread goes on (the next slice's callback runs in the batch after).
      const { df, segments } = this.databases;
      const applied: Promise<unknown>[] = [];
      let previousRan: Promise<unknown> = Promise.resolve();
      for (let from = 0; from < plan.terms.length; from += DF_SLICE_TERMS) {
        const to = Math.min(plan.terms.length, from + DF_SLICE_TERMS);
        if (from > 0) {
          await previousRan;
          await yieldBetween();
        }
        let ran!: () => void;
        const callbackRan = new Promise<void>((resolve) => {
          ran = resolve;
        });
        const committed = this.asyncTransaction(() => {
          ran();
          const record = segments.get(segment);
          if (record?.state !== 'building') throw new Error(`segment ${segment} is no longer being built`);
          for (let index = from; index < to; index += 1) {
            const term = plan.terms[index] as string;
            df.put(term, ((df.get(term) as number | undefined) ?? 0) + (plan.counts[index] as number));
          }
          this.counters.keys += to - from;
          segments.put(segment, { ...record, df_applied: to });
        });
        applied.push(committed);
        // A transaction that failed before its callback ran must not hold the loop.
        previousRan = Promise.race([callbackRan, committed.then(noop, noop)]);
      }
      // All settled before a failure is reported, so none is still running when the segment is abandoned.
      for (const outcome of await Promise.allSettled(applied)) if (outcome.status === 'rejected') throw outcome.reason;
      return this.transaction(() => this.publish(documents, segment, firstChunk));
    } catch (error) {
      // Nothing half-written becomes searchable: the segment is abandoned and swept by the merger.
      this.transaction(() => {
        const record = this.databases.segments.get(segment);
        if (record?.state === 'building') this.databases.segments.put(segment, { ...record, state: 'abandoned' });
      });
      throw error;
    }
  }

  /** Removes a document and everything indexed for it; runs inside a write transaction. */
  remove(document: DocumentRecord, dfChanges: Map<string, number>): void {
    const { documents, documentTerms, byCollection, collections, chunks, dead, vectors, meta } = this.databases;
    const code = meta.get(`code:${document.collection}`) as string | undefined;
    let removedLength = 0;
    for (let chunk = document.first_chunk; chunk < document.first_chunk + document.chunks; chunk += 1) {
      const record = chunks.get(chunk);
      if (!record) continue;
      removedLength += record.length;
      chunks.remove(chunk);
      dead.put(chunk, 1);
      if (code !== undefined) vectors.remove(vectorKey(code, chunk));
    }
    const terms = documentTerms.get(document.terms_key);
    if (terms) {
      const list = terms.terms.split('\n');
      list.forEach((term, index) => {
        dfChanges.set(term, (dfChanges.get(term) ?? 0) - (terms.counts[index] ?? 0));
      });
    }
    documents.remove(document.id);
    documentTerms.remove(document.terms_key);
    byCollection.remove(`${document.collection}\u0000${document.id}`);
    const collection = collections.get(document.collection);
    if (collection) {
      const remaining = collection.documents - 1;
      if (remaining <= 0) collections.remove(document.collection);
      else collections.put(document.collection, { documents: remaining, chunks: Math.max(0, collection.chunks - document.chunks) });
    }
    const corpus = readCorpus(this.databases);
    meta.put('corpus', {
      documents: Math.max(0, corpus.documents - 1),
      chunks: Math.max(0, corpus.chunks - document.chunks),
      total_length: Math.max(0, corpus.total_length - removedLength),
      last_indexed: corpus.last_indexed,
    } satisfies CorpusRecord);
  }

  /** Adds collected document-frequency changes to rag-df; runs inside a write transaction. */
  applyFrequencies(changes: Map<string, number>): void {
    const { df } = this.databases;
    for (const [term, change] of changes) {
      if (change === 0) continue;
      const frequency = (df.get(term) ?? 0) + change;
      if (frequency > 0) df.put(term, frequency);
      else df.remove(term);
      this.counters.keys += 1;
    }
  }

  /** Runs `work` in a synchronous write transaction, counting it. */
  transaction<T>(work: () => T): T {
    this.counters.transactions += 1;
    return this.root.transactionSync(work);
  }

  /** Runs `work` in an asynchronous write transaction (committed on lmdb-js's write thread), counting it. */
  asyncTransaction<T>(work: () => T): Promise<T> {
    this.counters.transactions += 1;
    return this.root.transaction(work);
  }

  /** The collection's short code, made on first use (inside a write transaction). */
  codeFor(collection: string): string {
    const { meta } = this.databases;
    const existing = meta.get(`code:${collection}`) as string | undefined;
    if (existing !== undefined) return existing;
    const code = this.advance('collection_sequence', 1).toString(36);
    meta.put(`code:${collection}`, code);
    return code;
  }

  /** Slices of the segment's chunk, vector and block writes, each small enough for one short transaction. */
  private *segmentWrites(
    documents: readonly DocumentToWrite[],
    plan: SegmentPlan,
    segment: string,
    firstChunk: number,
    code: string,
  ): Generator<() => Promise<unknown>> {
    const { chunks, vectors, blocks, documentTerms } = this.databases;
    let pending: Array<() => Promise<unknown>> = [];
    let pendingBytes = 0;
    const full = () => pending.length >= SLICE_WRITES || pendingBytes >= SLICE_BYTES;
    const flush = () => {
      const batch = pending;
      pending = [];
      pendingBytes = 0;
      return () => {
        // Puts of one event turn usually commit together, but lmdb-js may split a large batch:
        // every put is awaited, so a failed commit rejects here instead of going unhandled.
        const committed = Promise.all(batch.map((put) => put()));
        this.counters.keys += batch.length;
        this.counters.transactions += 1;
        return committed;
      };
    };
    let chunk = firstChunk;
    for (const document of documents) {
      const { texts, lengths, pages } = document.content;
      for (let ordinal = 0; ordinal < texts.length; ordinal += 1) {
        const text = texts[ordinal] as string;
        const number = chunk + ordinal;
        const page = pages?.[ordinal];
        pending.push(() =>
          chunks.put(number, { document_id: document.id, ordinal, text, length: lengths[ordinal] ?? 0, ...(page ? { page } : {}) }),
        );
        pendingBytes += text.length;
        const vector = document.vectors?.[ordinal];
        if (vector) {
          pending.push(() => vectors.put(vectorKey(code, number), Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength)));
          pendingBytes += vector.byteLength;
        }
        if (full()) yield flush();
      }
      const { postings } = document.content;
      const counts: number[] = [];
      for (let index = 0; index < termCount(postings); index += 1) {
        counts.push((postings.offsets[index + 1] as number) - (postings.offsets[index] as number));
      }
      const terms = { terms: joinedTerms(postings), counts } satisfies DocumentTerms;
      pending.push(() => documentTerms.put(documentTermsKey(segment, document.id), terms));
      pendingBytes += terms.terms.length;
      chunk += texts.length;
      if (full()) yield flush();
    }
    // One block per term for the whole segment: the documents' entries in chunk order, each
    // document's offsets moved by the chunks before it, packed into pages (pages.ts). Blocks are
    // built a slice of terms at a time (SLICE_WRITES terms or SLICE_BYTES of blocks) in one buffer
    // and copied into their pages; each slice's pages are one transaction, and the writer yields
    // to the event loop between slices.
    const pages = new PageWriter(segment, (key, page) => {
      pending.push(() => blocks.put(key, page));
      pendingBytes += page.byteLength;
    });
    const { terms: sorted, counts } = plan;
    for (let from = 0; from < sorted.length; ) {
      let to = from;
      let bytes = 0;
      while (to < sorted.length && to - from < SLICE_WRITES && (to === from || bytes < SLICE_BYTES)) {
        bytes += (counts[to] as number) * ENTRY_BYTES;
        to += 1;
      }
      const words = new Uint32Array(bytes / 4);
      const buffer = Buffer.from(words.buffer);
      let at = 0;
      for (let term = from; term < to; term += 1) {
        const start = at;
        at = copyTermBlock(plan, documents, term, words, at);
        pages.add(sorted[term] as string, buffer.subarray(start * 4, at * 4));
      }
      from = to;
      if (pending.length > 0) yield flush();
    }
    const directory = pages.finish();
    pending.push(() => this.databases.meta.put(pageDirectoryKey(segment), directory));
    if (pending.length > 0) yield flush();
  }

  /** Makes the segment and its documents visible, replacing earlier versions (one transaction). */
  private publish(documents: readonly DocumentToWrite[], segment: string, firstChunk: number): IngestResult[] {
    const { documents: records, byCollection, collections, segments, meta } = this.databases;
    const record = segments.get(segment);
    if (record?.state !== 'building') throw new Error(`segment ${segment} is no longer being built`);
    const now = new Date().toISOString();
    const dfChanges = new Map<string, number>();
    const results: IngestResult[] = [];
    let chunk = firstChunk;
    let addedChunks = 0;
    let addedLength = 0;
    for (const document of documents) {
      const existing = records.get(document.id);
      if (existing) this.remove(existing, dfChanges);
      const { texts, lengths } = document.content;
      records.put(document.id, documentRecord(document, segment, chunk, now));
      byCollection.put(`${document.collection}\u0000${document.id}`, 1);
      for (const value of lengths) addedLength += value;
      addedChunks += texts.length;
      this.counters.keys += 2;
      results.push({
        document_id: document.id,
        collection: document.collection,
        title: document.title,
        chunks: texts.length,
        replaced: existing !== undefined,
      });
      chunk += texts.length;
    }
    // Totals once per segment (after the removals above made theirs). A segment holds one collection.
    const name = (documents[0] as DocumentToWrite).collection;
    const collection = collections.get(name) ?? { documents: 0, chunks: 0 };
    collections.put(name, { documents: collection.documents + documents.length, chunks: collection.chunks + addedChunks });
    const corpus = readCorpus(this.databases);
    meta.put('corpus', {
      documents: corpus.documents + documents.length,
      chunks: corpus.chunks + addedChunks,
      total_length: corpus.total_length + addedLength,
      last_indexed: now,
    } satisfies CorpusRecord);
    // Frequencies of the versions replaced; the new ones were applied before.
    this.applyFrequencies(dfChanges);
    const { df_applied: _applied, ...live } = record;
    segments.put(segment, { ...live, state: 'live' });
    meta.remove(segmentTermsKey(segment));
    return results;
  }

  /** Adds `by` to a persisted counter and returns its new value (inside a write transaction). */
  advance(name: 'chunk_sequence' | 'collection_sequence' | 'segment_sequence', by: number): number {
    const value = ((this.databases.meta.get(name) as number | undefined) ?? 0) + by;
    this.databases.meta.put(name, value);
    return value;
  }
}

/** The stored record of a document whose chunks start at `firstChunk` in `segment` (both engines). */
export function documentRecord(document: DocumentToWrite, segment: string, firstChunk: number, now: string): DocumentRecord {
  return {
    id: document.id,
    key: document.key,
    title: document.title,
    url: document.url,
    collection: document.collection,
    chunks: document.content.texts.length,
    first_chunk: firstChunk,
    terms_key: documentTermsKey(segment, document.id),
    chars: document.content.chars,
    format: document.format,
    ...(document.pages !== undefined ? { pages: document.pages } : {}),
    indexed_at: document.indexedAt ?? now,
  };
}

/** What a segment of these documents (one collection, at least one document) holds. */
export function segmentSize(documents: readonly DocumentToWrite[]): { collection: string; chunkCount: number; postingCount: number } {
  let chunkCount = 0;
  let postingCount = 0;
  for (const document of documents) {
    chunkCount += document.content.texts.length;
    postingCount += document.content.postings.offsets[termCount(document.content.postings)] as number;
  }
  return { collection: (documents[0] as DocumentToWrite).collection, chunkCount, postingCount };
}
