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
import type { DocumentFormat } from './extract.js';
import {
  blockKey,
  documentTermsKey,
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
import { ENTRY_BYTES, joinedTerms, sortedOrder, termCount, termHash } from './postings.js';
import type { PreparedContent } from './prepare.js';

/** Keys written per transaction while a segment is built. */
const SLICE_WRITES = 2000;
/** Bytes of values written per transaction while a segment is built. */
const SLICE_BYTES = 256 * 1024;
/** Term insertions between yields while a segment is planned. */
const PLAN_STEP = 20_000;

/** A document ready to be written: its identity and its prepared content. */
export interface DocumentToWrite {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  format: DocumentFormat;
  content: PreparedContent;
  vectors?: Float32Array[] | undefined;
  pages?: number | undefined;
  /** When it was first indexed (an imported document keeps its time); default: when it is published. */
  indexedAt?: string | undefined;
}

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

/**
 * How a segment's blocks are assembled: its terms sorted, their document frequencies, and for each
 * term the documents that hold it, as a list threaded through typed arrays (no per-term objects).
 */
export interface SegmentPlan {
  terms: string[];
  /** Chunks of the segment that hold terms[i]. */
  counts: Uint32Array;
  /** First occurrence of terms[i] (an index into `documentOf`, `indexIn` and `next`). */
  heads: Int32Array;
  /** Per occurrence: the document's position in the segment, the term's index in that document's postings, and the next occurrence of the same term (-1 after the last). Occurrences of a term are in document order. */
  documentOf: Uint32Array;
  indexIn: Uint32Array;
  next: Int32Array;
  /** Each document's entries as 32-bit words (two per entry), for copying. */
  words: Uint32Array[];
  /** Chunks before each document in the segment. */
  shifts: number[];
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** A document's entries as 32-bit words (a copy only when they are not 4-byte aligned). */
function entryWords(entries: Uint8Array): Uint32Array {
  const aligned = entries.byteOffset % 4 === 0 ? entries : new Uint8Array(entries);
  return new Uint32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
}

/**
 * Numbers distinct terms in order of first sight: an open-addressing table over the terms' hashes
 * (brought from the worker thread with the postings), so a term already seen costs a hash
 * comparison and one string comparison, not hashing the string again.
 */
class TermNumbers {
  readonly terms: string[] = [];
  private hashes = new Uint32Array(1024);
  private slots = new Int32Array(2048).fill(-1);
  private mask = 2047;

  /** The number of `term` (whose termHash is `hash`), given on first sight. */
  number(term: string, hash: number): number {
    return this.numberIn(term, 0, term.length, hash);
  }

  /** number() of text.slice(start, end), sliced only when the term is new. */
  numberIn(text: string, start: number, end: number, hash: number): number {
    const length = end - start;
    for (let slot = hash & this.mask; ; slot = (slot + 1) & this.mask) {
      const id = this.slots[slot] as number;
      if (id === -1) {
        const added = this.terms.length;
        this.terms.push(start === 0 && end === text.length ? text : text.slice(start, end));
        if (added === this.hashes.length) this.grow();
        this.hashes[added] = hash;
        // At most half full: a free slot is near.
        if (this.terms.length * 2 > this.slots.length) this.rehash();
        else this.slots[slot] = added;
        return added;
      }
      if (this.hashes[id] === hash) {
        const known = this.terms[id] as string;
        if (known.length === length && text.startsWith(known, start)) return id;
      }
    }
  }

  private grow(): void {
    const hashes = new Uint32Array(this.hashes.length * 2);
    hashes.set(this.hashes);
    this.hashes = hashes;
  }

  /** Twice the slots, every term placed again (the last one added included). */
  private rehash(): void {
    this.slots = new Int32Array(this.slots.length * 2).fill(-1);
    this.mask = this.slots.length - 1;
    for (let id = 0; id < this.terms.length; id += 1) {
      let slot = (this.hashes[id] as number) & this.mask;
      while (this.slots[slot] !== -1) slot = (slot + 1) & this.mask;
      this.slots[slot] = id;
    }
  }
}

/**
 * Plans a segment in steps that yield to the event loop (a batch of large documents holds
 * hundreds of thousands of terms): each distinct term gets a number on first sight, its
 * occurrences are chained in document order, and the distinct terms are sorted once.
 */
export async function planSegment(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<SegmentPlan> {
  let total = 0;
  for (const document of documents) total += termCount(document.content.postings);
  const numbers = new TermNumbers();
  const byId = numbers.terms;
  const documentOf = new Uint32Array(total);
  const indexIn = new Uint32Array(total);
  const next = new Int32Array(total);
  const headById = new Int32Array(total);
  const tailById = new Int32Array(total);
  const countById = new Uint32Array(total);
  let occurrence = 0;
  let work = 0;
  for (const [position, document] of documents.entries()) {
    const { postings } = document.content;
    const { offsets, hashes, termText } = postings;
    const count = termCount(postings);
    // Terms that came from a worker thread are read from their joined string: only a term not
    // seen before in the segment becomes a string of its own.
    const terms = hashes && termText !== undefined ? undefined : postings.terms;
    let start = 0;
    for (let index = 0; index < count; index += 1) {
      const known = byId.length;
      let id: number;
      if (terms) {
        const term = terms[index] as string;
        id = numbers.number(term, hashes ? (hashes[index] as number) : termHash(term));
      } else {
        const text = termText as string;
        let end = text.indexOf('\n', start);
        if (end < 0) end = text.length;
        id = numbers.numberIn(text, start, end, (hashes as Uint32Array)[index] as number);
        start = end + 1;
      }
      if (id === known) headById[id] = occurrence;
      else next[tailById[id] as number] = occurrence;
      tailById[id] = occurrence;
      next[occurrence] = -1;
      countById[id] = (countById[id] as number) + (offsets[index + 1] as number) - (offsets[index] as number);
      documentOf[occurrence] = position;
      indexIn[occurrence] = index;
      occurrence += 1;
    }
    work += count;
    if (work >= PLAN_STEP) {
      work = 0;
      await yieldBetween();
    }
  }
  const shifts: number[] = [];
  let shift = 0;
  for (const document of documents) {
    shifts.push(shift);
    shift += document.content.texts.length;
  }
  await yieldBetween();
  // Code-unit order, as the documents' own term lists and the stored keys.
  const order = sortedOrder(byId);
  await yieldBetween();
  const terms: string[] = new Array(order.length);
  const counts = new Uint32Array(order.length);
  const heads = new Int32Array(order.length);
  for (let at = 0; at < order.length; at += 1) {
    const id = order[at] as number;
    terms[at] = byId[id] as string;
    counts[at] = countById[id] as number;
    heads[at] = headById[id] as number;
  }
  const words = documents.map((document) => entryWords(document.content.postings.entries));
  return { terms, counts, heads, documentOf, indexIn, next, words, shifts };
}

/**
 * Copies the block of plan.terms[at] (every document's entries in chunk order, each document's
 * offsets moved by the chunks before it) into `out` (32-bit words) from word `position`; returns
 * the word after it. The block is plan.counts[at] entries long.
 */
export function copyTermBlock(
  plan: SegmentPlan,
  documents: readonly DocumentToWrite[],
  at: number,
  out: Uint32Array,
  position: number,
): number {
  let write = position;
  for (let occurrence = plan.heads[at] as number; occurrence !== -1; occurrence = plan.next[occurrence] as number) {
    const document = plan.documentOf[occurrence] as number;
    const index = plan.indexIn[occurrence] as number;
    const { offsets } = (documents[document] as DocumentToWrite).content.postings;
    const source = plan.words[document] as Uint32Array;
    const end = (offsets[index + 1] as number) * 2;
    const moved = plan.shifts[document] as number;
    for (let word = (offsets[index] as number) * 2; word < end; word += 2) {
      out[write] = moved === 0 || !LITTLE_ENDIAN ? (source[word] as number) : (source[word] as number) + moved;
      out[write + 1] = source[word + 1] as number;
      write += 2;
    }
    if (moved !== 0 && !LITTLE_ENDIAN) {
      const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
      for (let word = write - (end - (offsets[index] as number) * 2); word < write; word += 2)
        view.setUint32(word * 4, view.getUint32(word * 4, true) + moved, true);
    }
  }
  return write;
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
      // on lmdb-js's write thread. One is queued per event turn (so each is its own transaction)
      // without waiting for the previous commit: lmdb-js runs them in order, and the write thread
      // commits one while the main thread runs the next one's callback.
      const { df, segments } = this.databases;
      const applied: Promise<unknown>[] = [];
      for (let from = 0; from < plan.terms.length; from += SLICE_WRITES) {
        const to = Math.min(plan.terms.length, from + SLICE_WRITES);
        if (from > 0) await yieldBetween();
        applied.push(
          this.asyncTransaction(() => {
            const record = segments.get(segment);
            if (record?.state !== 'building') throw new Error(`segment ${segment} is no longer being built`);
            for (let index = from; index < to; index += 1) {
              const term = plan.terms[index] as string;
              df.put(term, ((df.get(term) as number | undefined) ?? 0) + (plan.counts[index] as number));
            }
            this.counters.keys += to - from;
            segments.put(segment, { ...record, df_applied: to });
          }),
        );
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
    // document's offsets moved by the chunks before it. Blocks of a slice share one buffer.
    const { terms: sorted, counts } = plan;
    for (let from = 0; from < sorted.length; ) {
      // A slice ends at SLICE_WRITES blocks or when its blocks reach 4 × SLICE_BYTES (blocks are copied, not encoded).
      let to = from;
      let bytes = 0;
      while (to < sorted.length && to - from < SLICE_WRITES && (to === from || bytes < 4 * SLICE_BYTES)) {
        bytes += (counts[to] as number) * ENTRY_BYTES;
        to += 1;
      }
      const words = new Uint32Array(bytes / 4);
      const buffer = Buffer.from(words.buffer);
      let at = 0;
      for (let term = from; term < to; term += 1) {
        const start = at;
        at = copyTermBlock(plan, documents, term, words, at);
        const block = buffer.subarray(start * 4, at * 4);
        const key = blockKey(segment, sorted[term] as string);
        pending.push(() => blocks.put(key, block));
      }
      from = to;
      yield flush();
    }
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
