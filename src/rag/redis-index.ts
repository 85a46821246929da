/**
 * The knowledge base on Redis, on the design of the LMDB index (index-store.ts, ingestion.ts): a
 * segmented BM25 index whose posting blocks have the same binary format (postings.ts), exact
 * document frequencies, tombstoned deletes and background merges (redis-merge.ts), ranked by the
 * same code (bm25.ts, retrieval.ts) from the same figures. Nothing about the index is cached in a
 * process: every node reads the shared state, so a document ingested through one node is found
 * through every other at once.
 *
 * A write allocates a `building` segment (invisible to queries), writes its chunks, vectors,
 * blocks and document-frequency contributions under keys no reader looks at, and publishes it in
 * one Lua script (redis-scripts.ts PUBLISH) with its documents, statistics and the removal of the
 * versions it replaces. A query reads the statistics, the segment list and its terms' blocks in one
 * script too (SNAPSHOT), so it never sees half of a publish or of a merge.
 *
 * Keys (each behind the deployment prefix, RedisStorage.key):
 *   rag:meta            hash: stop_words, sequences, corpus totals, retrieval counters
 *   rag:docs            hash: document id → DocumentRecord (JSON)
 *   rag:ids             sorted set of document ids (all score 0: ordered by id)
 *   rag:by-coll:NAME    sorted set of a collection's document ids
 *   rag:coll-docs       hash: collection → documents;  rag:coll-chunks: collection → chunks
 *   rag:codes           hash: collection → short code
 *   rag:chunks          hash: chunk number → ChunkRecord (JSON)
 *   rag:vecs:CODE       hash: chunk number → Float32 vector bytes (embeddings only)
 *   rag:segments        hash: segment key → SegmentRecord (JSON)
 *   rag:blocks:SEGMENT  hash: term → posting block (binary)
 *   rag:seg-terms:SEG   hash: term → chunks of an unpublished segment that hold it
 *   rag:doc-terms       hash: terms key → DocumentTerms (JSON), to correct frequencies on delete
 *   rag:dead            set: deleted chunks whose postings a segment may still hold
 *   rag:df              hash: term → document frequency in live chunks (exact)
 *   rag:merge-lock      the merge lock (SET NX PX)
 */
import type { RedisStorage } from '../store/redis.js';
import type { BackendOptions, ExportedChunk, ExportedDocument, IndexBackend, IndexFigures } from './backend.js';
import { betterHit, scoreChunks, scoredTerms, type LexicalHit } from './bm25.js';
import {
  documentTermsKey,
  vectorKey,
  type ChunkRecord,
  type CollectionSummary,
  type DocumentRecord,
  type DocumentTerms,
} from './index-store.js';
import { documentRecord, segmentSize, type DocumentToWrite, type IngestResult, type WriteCounters } from './ingestion.js';
import { ENTRY_BYTES, joinedTerms, termCount } from './postings.js';
import { copyTermBlock, planSegment } from './segment-plan.js';
import type { ChunkOptions } from './prepare.js';
import { RedisMerger } from './redis-merge.js';
import { RedisCommands } from './redis-commands.js';
import { ALLOCATE, PUBLISH, REMOVE, SNAPSHOT } from './redis-scripts.js';
import { cosine, fuse, insertSorted, passageOf, type VectorHit } from './retrieval.js';
import { tokenize } from './tokenize.js';
import type { Passage } from './types.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Documents removed per script when a collection is deleted. */
const REMOVE_BATCH = 100;

/** Chunk numbers as hash fields. */
function range(first: number, count: number): string[] {
  return Array.from({ length: count }, (_, index) => String(first + index));
}

/** Documents, chunks, the lexical and vector indexes and the retrieval counters, in Redis. */
export class RedisIndex implements IndexBackend {
  private readonly redis: RedisCommands;
  private readonly merger: RedisMerger;
  private readonly counterWrites = new Set<Promise<unknown>>();
  private stopWords = true;
  readonly writeCounters: WriteCounters = { keys: 0, transactions: 0 };

  constructor(
    storage: RedisStorage,
    private readonly options: BackendOptions,
  ) {
    this.redis = new RedisCommands(storage);
    this.merger = new RedisMerger(this.redis, options.logger);
  }

  async open(): Promise<ChunkOptions> {
    const wanted = this.options.chunkOptions.stopWords ? '1' : '0';
    // The stop-word setting decides which postings exist, so it is fixed at index creation.
    await this.redis.send(['HSETNX', this.redis.key('meta'), 'stop_words', wanted]);
    const stored = await this.redis.send<string | null>(['HGET', this.redis.key('meta'), 'stop_words']);
    this.stopWords = stored !== '0';
    this.merger.schedule();
    return { ...this.options.chunkOptions, stopWords: this.stopWords };
  }

  get mergedPostings(): number {
    return this.merger.copiedPostings;
  }

  async write(documents: readonly DocumentToWrite[], yieldBetween: () => Promise<void>): Promise<IngestResult[]> {
    if (documents.length === 0) return [];
    const { collection, chunkCount, postingCount } = segmentSize(documents);
    const building = {
      state: 'building',
      origin: 'ingest',
      span: chunkCount,
      postings: postingCount,
      pid: process.pid,
      documents: documents.map((document) => document.id),
    };
    const [segment, firstChunk, code] = await this.redis.script<[string, number, string]>(ALLOCATE, [
      collection,
      String(chunkCount),
      JSON.stringify(building),
      String(Date.now()),
    ]);
    this.writeCounters.transactions += 1;
    try {
      await this.writeSegment(documents, yieldBetween, segment, firstChunk, code);
      return await this.publish(documents, segment, firstChunk);
    } catch (error) {
      // Nothing half-written becomes searchable: the segment's keys are removed (or swept later).
      await this.merger.discard(segment).catch(() => undefined);
      throw error;
    }
  }

  /** Writes the segment's chunks, vectors, term lists and blocks under keys no query reads yet. */
  private async writeSegment(
    documents: readonly DocumentToWrite[],
    yieldBetween: () => Promise<void>,
    segment: string,
    firstChunk: number,
    code: string,
  ): Promise<void> {
    const chunks: Array<[string, string]> = [];
    const vectors: Array<[string, Buffer]> = [];
    const documentTerms: Array<[string, string]> = [];
    let chunk = firstChunk;
    for (const document of documents) {
      const { texts, lengths, pages, postings } = document.content;
      texts.forEach((text, ordinal) => {
        const page = pages?.[ordinal];
        const record: ChunkRecord = { document_id: document.id, ordinal, text, length: lengths[ordinal] ?? 0, ...(page ? { page } : {}) };
        chunks.push([String(chunk + ordinal), JSON.stringify(record)]);
        const vector = document.vectors?.[ordinal];
        if (vector) vectors.push([String(chunk + ordinal), Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength)]);
      });
      const counts: number[] = [];
      for (let index = 0; index < termCount(postings); index += 1) {
        counts.push((postings.offsets[index + 1] as number) - (postings.offsets[index] as number));
      }
      documentTerms.push([
        documentTermsKey(segment, document.id),
        JSON.stringify({ terms: joinedTerms(postings), counts } satisfies DocumentTerms),
      ]);
      chunk += texts.length;
    }
    await this.redis.hashSet(this.redis.key('chunks'), chunks);
    if (vectors.length > 0) await this.redis.hashSet(this.redis.key(`vecs:${code}`), vectors);
    await this.redis.hashSet(this.redis.key('doc-terms'), documentTerms);
    const plan = await planSegment(documents, yieldBetween);
    const blocks: Array<[string, Buffer]> = [];
    const frequencies: Array<[string, string]> = [];
    plan.terms.forEach((term, at) => {
      const words = new Uint32Array(((plan.counts[at] as number) * ENTRY_BYTES) / 4);
      copyTermBlock(plan, documents, at, words, 0);
      blocks.push([term, Buffer.from(words.buffer)]);
      frequencies.push([term, String(plan.counts[at])]);
    });
    await this.redis.hashSet(this.redis.key(`blocks:${segment}`), blocks);
    await this.redis.hashSet(this.redis.key(`seg-terms:${segment}`), frequencies);
    this.writeCounters.keys += chunks.length + vectors.length + documentTerms.length + blocks.length + frequencies.length;
    this.writeCounters.transactions += 1;
  }

  /** Makes the segment and its documents visible in one script, replacing earlier versions. */
  private async publish(documents: readonly DocumentToWrite[], segment: string, firstChunk: number): Promise<IngestResult[]> {
    const now = new Date().toISOString();
    let chunk = firstChunk;
    let addedLength = 0;
    const records = documents.map((document) => {
      const { texts, lengths } = document.content;
      for (const value of lengths) addedLength += value;
      const record = documentRecord(document, segment, chunk, now);
      chunk += texts.length;
      return JSON.stringify(record);
    });
    const replaced = await this.redis.script<number[]>(PUBLISH, [
      segment,
      now,
      String(chunk - firstChunk),
      String(addedLength),
      ...records,
    ]);
    this.writeCounters.transactions += 1;
    return documents.map((document, index) => ({
      document_id: document.id,
      collection: document.collection,
      title: document.title,
      chunks: document.content.texts.length,
      replaced: replaced[index] === 1,
    }));
  }

  afterWrite(): void {
    this.merger.schedule();
  }

  async segmentCounts(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const record of await this.merger.segments()) counts[record.state] = (counts[record.state] ?? 0) + 1;
    return counts;
  }

  async hasCollection(name: string): Promise<boolean> {
    return (await this.redis.send<number>(['HEXISTS', this.redis.key('coll-docs'), name])) === 1;
  }

  async get(documentId: string): Promise<DocumentRecord | undefined> {
    const stored = await this.redis.send<string | null>(['HGET', this.redis.key('docs'), documentId]);
    return stored ? (JSON.parse(stored) as DocumentRecord) : undefined;
  }

  async remove(documentId: string, collection?: string): Promise<boolean> {
    return (await this.redis.script<number>(REMOVE, [collection ?? '', documentId])) > 0;
  }

  async removeCollection(collection: string): Promise<number> {
    let removed = 0;
    for (;;) {
      const ids = await this.redis.send<string[]>(['ZRANGE', this.redis.key(`by-coll:${collection}`), '0', String(REMOVE_BATCH - 1)]);
      if (ids.length === 0) return removed;
      removed += await this.redis.script<number>(REMOVE, [collection, ...ids]);
    }
  }

  async list(options: { collection?: string | undefined; limit: number; after?: string | undefined }): Promise<DocumentRecord[]> {
    const { collection, limit, after } = options;
    const set = collection === undefined ? 'ids' : `by-coll:${collection}`;
    const ids = await this.redis.send<string[]>([
      'ZRANGE',
      this.redis.key(set),
      after ? `(${after}` : '-',
      '+',
      'BYLEX',
      'LIMIT',
      '0',
      String(limit),
    ]);
    return this.documents(ids);
  }

  /** Documents by id, in that order, leaving out the missing. */
  private async documents(ids: readonly string[]): Promise<DocumentRecord[]> {
    if (ids.length === 0) return [];
    const stored = await this.redis.send<Array<string | null>>(['HMGET', this.redis.key('docs'), ...ids]);
    return stored.filter((value): value is string => value !== null).map((value) => JSON.parse(value) as DocumentRecord);
  }

  async collections(): Promise<CollectionSummary[]> {
    const [documents, chunks] = await Promise.all([
      this.redis.entries(this.redis.key('coll-docs')),
      this.redis.entries(this.redis.key('coll-chunks')),
    ]);
    const chunksOf = new Map(chunks);
    const summaries: CollectionSummary[] = documents.map(([name, count]) => ({
      name,
      documents: Number(count),
      chunks: Number(chunksOf.get(name) ?? 0),
    }));
    return summaries.sort((left, right) => (left.name < right.name ? -1 : left.name > right.name ? 1 : 0)).slice(0, 10_000);
  }

  async retrieve(query: string, options: { topK: number; collection?: string | undefined }, signal?: CancelSignal): Promise<Passage[]> {
    const topK = Math.max(1, Math.min(options.topK, 50));
    const candidatesWanted = Math.max(50, topK * 4);
    const queryTerms = tokenize(query, { stopWords: this.stopWords });
    // The terms scored are chosen by rarity first, then read with everything else from one snapshot.
    const unique = [...new Set(queryTerms)];
    const known = unique.length > 0 ? await this.redis.send<Array<string | null>>(['HMGET', this.redis.key('df'), ...unique]) : [];
    const rarity = new Map(unique.map((term, index) => [term, Number(known[index] ?? 0)]));
    const terms = scoredTerms(queryTerms, (term) => rarity.get(term) ?? 0).map((entry) => entry.term);
    const snapshot = await this.redis.script<[number, number, Buffer, Buffer[], Array<Buffer | number>, Array<Array<Buffer | null>>]>(
      SNAPSHOT,
      [options.collection ?? '', ...terms],
      true,
    );
    const [chunks, totalLength, codeBuffer, dfs, segmentList, blockLists] = snapshot;
    const code = codeBuffer.length > 0 ? codeBuffer.toString() : undefined;
    const searchable = chunks > 0 && (options.collection === undefined || code !== undefined);
    const records = new Map<number, ChunkRecord>();
    let lexical: LexicalHit[] = [];
    if (searchable) {
      const df = new Map(terms.map((term, index) => [term, Number(String(dfs[index] ?? '0'))]));
      const views = [];
      const blocks = new Map<string, Buffer>();
      for (let index = 0; index < segmentList.length; index += 3) {
        const key = String(segmentList[index]);
        views.push({ key, first: Number(segmentList[index + 1]), span: Number(segmentList[index + 2]) });
        const list = blockLists[index / 3] ?? [];
        terms.forEach((term, at) => {
          const block = list[at];
          if (block) blocks.set(`${key}\u0000${term}`, block);
        });
      }
      views.sort((left, right) => (left.key < right.key ? -1 : 1));
      const scores = scoreChunks(
        { block: (segment, term) => blocks.get(`${segment}\u0000${term}`), df: (term) => df.get(term) ?? 0 },
        views,
        queryTerms,
        { chunks, averageLength: totalLength / chunks },
        { scanLimit: this.options.scanLimit },
      );
      lexical = await this.liveHits(scores, candidatesWanted, records);
    }
    let vectorHits: VectorHit[] = [];
    const { embedder } = this.options;
    if (embedder && searchable) {
      try {
        const [vector] = await embedder.embed([query], signal);
        if (vector) vectorHits = await this.vectorSearch(vector, code, candidatesWanted);
      } catch (error) {
        if (signal?.aborted) throw error;
        // Lexical retrieval still answers when the embeddings upstream is down.
        this.options.logger?.warn({ err: error }, 'query embedding failed; using BM25 only');
      }
    }
    signal?.throwIfAborted();
    return this.passages(fuse(lexical, vectorHits, this.options.minScore).slice(0, topK), records);
  }

  /** The `limit` best live chunks, best first (as bm25.ts topHits), checked against rag:chunks in batches. */
  private async liveHits(scores: Map<number, number>, limit: number, records: Map<number, ChunkRecord>): Promise<LexicalHit[]> {
    const ordered = Array.from(scores, ([chunk, score]) => ({ chunk, score })).sort((left, right) => (betterHit(left, right) ? -1 : 1));
    const best: LexicalHit[] = [];
    for (let from = 0; from < ordered.length && best.length < limit; from += limit) {
      const batch = ordered.slice(from, from + limit);
      await this.readChunks(
        batch.map((hit) => hit.chunk),
        records,
      );
      for (const hit of batch) if (records.has(hit.chunk) && best.length < limit) best.push(hit);
    }
    return best;
  }

  /** Reads chunk records not yet in `records` (absent ones are deleted chunks). */
  private async readChunks(numbers: readonly number[], records: Map<number, ChunkRecord>): Promise<void> {
    const wanted = numbers.filter((chunk) => !records.has(chunk));
    if (wanted.length === 0) return;
    const stored = await this.redis.send<Array<string | null>>(['HMGET', this.redis.key('chunks'), ...wanted.map(String)]);
    wanted.forEach((chunk, index) => {
      const value = stored[index];
      if (value) records.set(chunk, JSON.parse(value) as ChunkRecord);
    });
  }

  /** Exact cosine similarity over the stored unit vectors of one collection (or all). */
  private async vectorSearch(query: Float32Array, code: string | undefined, limit: number): Promise<VectorHit[]> {
    const codes = code !== undefined ? [code] : await this.redis.send<string[]>(['HVALS', this.redis.key('codes')]);
    const best: VectorHit[] = [];
    const hits: Array<VectorHit & { key: string }> = [];
    for (const each of codes) {
      for (const [chunk, vector] of await this.redis.entries<Buffer>(this.redis.key(`vecs:${each}`), true)) {
        const similarity = cosine(vector, query);
        if (similarity !== undefined) hits.push({ key: vectorKey(each, Number(chunk)), chunk: Number(chunk), similarity });
      }
    }
    // In LMDB's key order (rag-vecs), so equal similarities rank alike on both engines.
    hits.sort((left, right) => (left.key < right.key ? -1 : left.key > right.key ? 1 : 0));
    for (const { key: _key, ...hit } of hits) {
      if (best.length === limit && hit.similarity <= best[best.length - 1]!.similarity) continue;
      insertSorted(best, hit, limit);
    }
    return best;
  }

  /** The winners as passages, with their document's title and url. */
  private async passages(ranked: Array<{ chunk: number; score: number }>, records: Map<number, ChunkRecord>): Promise<Passage[]> {
    await this.readChunks(
      ranked.map((hit) => hit.chunk),
      records,
    );
    const ids = [...new Set(ranked.map((hit) => records.get(hit.chunk)?.document_id).filter((id): id is string => id !== undefined))];
    const documents = new Map((await this.documents(ids)).map((record) => [record.id, record]));
    const passages: Passage[] = [];
    for (const hit of ranked) {
      const chunk = records.get(hit.chunk);
      const document = chunk && documents.get(chunk.document_id);
      if (!chunk || !document) continue;
      passages.push(passageOf(document, chunk, hit.score));
    }
    return passages;
  }

  recordRetrieval(hit: boolean, elapsedMs: number): void {
    const key = this.redis.key('meta');
    // Shared by every node; written in the background so a query never waits for it.
    const write = this.redis.storage
      .call((client) =>
        client
          .multi()
          .hIncrBy(key, 'queries', 1)
          .hIncrBy(key, 'hits', hit ? 1 : 0)
          .hIncrByFloat(key, 'total_ms', elapsedMs)
          .exec(),
      )
      .catch((error: unknown) => this.options.logger?.warn({ err: error }, 'retrieval counters not written'));
    this.counterWrites.add(write);
    write.finally(() => this.counterWrites.delete(write));
  }

  async flushCounters(): Promise<void> {
    await Promise.all(this.counterWrites);
  }

  async figures(): Promise<IndexFigures> {
    await this.flushCounters();
    const [meta, collections, bytes] = await Promise.all([
      this.redis.send<Array<string | null>>([
        'HMGET',
        this.redis.key('meta'),
        'documents',
        'chunks',
        'last_indexed',
        'queries',
        'hits',
        'total_ms',
      ]),
      this.redis.send<number>(['HLEN', this.redis.key('coll-docs')]),
      this.indexBytes(),
    ]);
    const [documents, chunks, lastIndexed, queries, hits, totalMs] = meta;
    return {
      documents: Number(documents ?? 0),
      chunks: Number(chunks ?? 0),
      collections,
      index_bytes: bytes,
      last_indexed: lastIndexed ?? null,
      queries: Number(queries ?? 0),
      hits: Number(hits ?? 0),
      total_ms: Number(totalMs ?? 0),
    };
  }

  /** Memory Redis reports for the index's keys (MEMORY USAGE samples large hashes: an estimate). */
  private async indexBytes(): Promise<number> {
    const [segments, codes] = await Promise.all([
      this.redis.send<string[]>(['HKEYS', this.redis.key('segments')]),
      this.redis.send<string[]>(['HVALS', this.redis.key('codes')]),
    ]);
    const names = ['meta', 'docs', 'ids', 'coll-docs', 'coll-chunks', 'codes', 'chunks', 'segments', 'doc-terms', 'dead', 'df'];
    names.push(...segments.map((segment) => `blocks:${segment}`), ...codes.map((code) => `vecs:${code}`));
    const sizes = await Promise.all(names.map((name) => this.redis.send<number | null>(['MEMORY', 'USAGE', this.redis.key(name)])));
    return sizes.reduce<number>((sum, size) => sum + (size ?? 0), 0);
  }

  async *exportDocuments(): AsyncIterable<ExportedDocument> {
    let after: string | undefined;
    for (;;) {
      const records = await this.list({ limit: 100, after });
      if (records.length === 0) return;
      for (const record of records) yield { record, chunks: await this.exportChunks(record) };
      after = records[records.length - 1]?.id;
    }
  }

  /** A document's chunks in order, with their vectors. */
  private async exportChunks(record: DocumentRecord): Promise<ExportedChunk[]> {
    const numbers = range(record.first_chunk, record.chunks);
    const code = await this.redis.send<string | null>(['HGET', this.redis.key('codes'), record.collection]);
    const [texts, vectors] = await Promise.all([
      this.redis.send<Array<string | null>>(['HMGET', this.redis.key('chunks'), ...numbers]),
      code === null
        ? Promise.resolve([])
        : this.redis.sendBinary<Array<Buffer | null>>(['HMGET', this.redis.key(`vecs:${code}`), ...numbers]),
    ]);
    const chunks: ExportedChunk[] = [];
    texts.forEach((stored, index) => {
      if (!stored) return;
      const chunk = JSON.parse(stored) as ChunkRecord;
      const vector = vectors[index];
      chunks.push({
        text: chunk.text,
        ...(chunk.page !== undefined ? { page: chunk.page } : {}),
        ...(vector ? { vector: Array.from(new Float32Array(Uint8Array.from(vector).buffer)) } : {}),
      });
    });
    return chunks;
  }

  async settle(): Promise<void> {
    await this.flushCounters();
    await this.merger.idle();
  }

  async close(): Promise<void> {
    await this.merger.close();
    await this.flushCounters();
  }
}
