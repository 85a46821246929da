/**
 * Background upkeep of the segmented index: merging and clean-up.
 *
 * Merging is tiered: a segment's tier grows with the log of its posting count, and once a
 * collection has MERGE_FACTOR live segments in one tier, the oldest of them are merged into one
 * segment of the next tier. A posting is therefore copied about log_8(N) times over the life of
 * an index of N postings, and a term is read from a few dozen blocks at most. The merge streams
 * the old segments' blocks in term order, drops the postings of deleted chunks, writes the new
 * segment in bounded transactions and swaps it in with one; queries keep reading the old
 * segments until the swap. Retired and abandoned segments are then removed a slice at a time.
 * Every step yields to the event loop between transactions.
 */
import type { Logger } from '../logger.js';
import {
  blockKey,
  pageDirectoryKey,
  segmentKeyFor,
  segmentTermCount,
  segmentTermsKey,
  vectorKey,
  type RagDatabases,
  type SegmentRecord,
  type SegmentTerms,
} from './index-store.js';
import type { IndexWriter } from './ingestion.js';
import { blockWords, type MergePart, mergeInto } from './postings.js';
import { BackgroundPasses } from './background-passes.js';
import { type PageRecord, PageWriter, pageRange, pageRecords, segmentBlockRange } from './pages.js';

/** Segments merged at once, and the size ratio between tiers. */
export const MERGE_FACTOR = 8;
/** Segments below this many postings are tier 0. */
const TIER_BASE = 16_384;
/** Blocks (of a segment written before pages) or pages read per segment per slice, and keys written or removed per transaction. */
const READ_SLICE = 32;
const READ_PAGES = 8;
const WRITE_SLICE = 2000;
/** Bytes of blocks written per transaction: a merge's blocks of common terms are large. */
const WRITE_SLICE_BYTES = 1024 * 1024;
/** Terms merged between yields to the event loop. */
const MERGE_STEP = 256;
/** Bytes of merged blocks between yields (blocks of common terms are large). */
const MERGE_STEP_BYTES = 256 * 1024;

/** The tier of a segment of `postings` postings. */
export function tierOf(postings: number): number {
  return postings < TIER_BASE ? 0 : Math.floor(Math.log(postings / TIER_BASE) / Math.log(MERGE_FACTOR)) + 1;
}

interface Named {
  key: string;
  record: SegmentRecord;
}

/**
 * A segment's blocks read in term order, a slice at a time (no read transaction outlives a slice):
 * its pages, or, for a segment written before pages, its keys of one block each.
 */
class BlockCursor {
  private buffer: PageRecord[] = [];
  private resume: string;
  private readonly end: string;
  private readonly paged: boolean;
  private exhausted = false;

  constructor(
    private readonly databases: RagDatabases,
    readonly segment: Named,
  ) {
    this.paged = databases.meta.get(pageDirectoryKey(segment.key)) !== undefined;
    const range = this.paged ? pageRange(segment.key) : { start: blockKey(segment.key, ''), end: `${segment.key}\u0001` };
    this.resume = range.start;
    this.end = range.end;
  }

  /** The next term, reading a slice when the buffer is empty; undefined at the end. */
  head(): PageRecord | undefined {
    if (this.buffer.length === 0 && !this.exhausted) {
      const limit = this.paged ? READ_PAGES : READ_SLICE;
      let read = 0;
      // A binary value read in a range is already the reader's own copy.
      for (const { key, value } of this.databases.blocks.getRange({ start: this.resume, end: this.end, limit })) {
        if (this.paged) for (const record of pageRecords(value)) this.buffer.push(record);
        else {
          const words = blockWords(value);
          this.buffer.push({ term: key.slice(this.segment.key.length + 1), words, from: 0, to: words.length });
        }
        this.resume = `${key}\u0000`;
        read += 1;
      }
      if (read < limit) this.exhausted = true;
      this.buffer.reverse();
    }
    return this.buffer[this.buffer.length - 1];
  }

  pop(): void {
    this.buffer.pop();
  }
}

/** True when a process with this id is running (a crashed writer's work can then be reclaimed). */
function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs merges and clean-up in the background, one pass at a time. */
export class SegmentMerger extends BackgroundPasses {
  /** Postings copied by merges (the bench's write amplification figure). */
  copiedPostings = 0;

  constructor(
    private readonly databases: RagDatabases,
    private readonly writer: IndexWriter,
    private readonly yieldBetween: () => Promise<void>,
    private readonly logger?: Logger | undefined,
  ) {
    super();
  }

  protected failed(error: unknown): void {
    this.logger?.error({ err: error }, 'knowledge-base merge failed; it is retried on the next write');
  }

  /**
   * Reclaims what crashed processes left: segments they were building are abandoned (an ingestion's)
   * or retired (a merge's), segments they were merging are live again.
   */
  recover(): void {
    this.writer.transaction(() => {
      for (const { key, value } of this.databases.segments.getRange()) {
        if (processAlive(value.pid)) continue;
        if (value.state === 'building')
          this.databases.segments.put(key, { ...value, state: value.origin === 'ingest' ? 'abandoned' : 'retired' });
        else if (value.state === 'merging') this.databases.segments.put(key, { ...value, state: 'live' });
      }
    });
  }

  /** Merges until no tier is full, then removes what merges and deletes left behind. */
  protected async pass(): Promise<void> {
    while (!this.closed && (await this.mergeOnce())) {
      // Merge until no tier is full.
    }
    await this.sweep();
  }

  /** Picks a full tier and merges it; false when there is nothing to merge. */
  private async mergeOnce(): Promise<boolean> {
    const picked = this.writer.transaction(() => this.pick());
    if (!picked) return false;
    const { target, sources } = picked;
    const first = target.record.first_chunk;
    const dropped = new Set<number>();
    const dead = new Set<number>();
    for (const source of sources) {
      const start = source.record.first_chunk;
      for (const chunk of this.databases.dead.getKeys({ start, end: start + source.record.span })) dead.add(chunk);
    }
    const cursors = sources.map((source) => new BlockCursor(this.databases, source));
    let postings = 0;
    let terms = 0;
    let stepBytes = 0;
    let pending: Array<[string, Buffer]> = [];
    let pendingBytes = 0;
    // The new segment's pages go in as asynchronous puts, committed on lmdb-js's write thread one
    // slice per event turn; it stays `building` (unread) until they are all committed.
    const commits: Promise<unknown>[] = [];
    const write = () => {
      const batch = pending;
      pending = [];
      pendingBytes = 0;
      // Every put is awaited (a split batch's failed commit must not go unhandled).
      commits.push(Promise.all(batch.map(([key, page]) => this.databases.blocks.put(key, page))));
      this.writer.counters.transactions += 1;
    };
    // Each term's merged block is built here, then copied into its page.
    let scratch = new Uint32Array(4096);
    const pages = new PageWriter(target.key, (key, page) => {
      pending.push([key, page]);
      pendingBytes += page.byteLength;
    });
    for (;;) {
      if (this.closed) return false;
      let term: string | undefined;
      for (const cursor of cursors) {
        const head = cursor.head();
        if (head && (term === undefined || head.term < term)) term = head.term;
      }
      if (term === undefined) break;
      const parts: MergePart[] = [];
      let words = 0;
      for (const cursor of cursors) {
        const head = cursor.head();
        if (head?.term !== term) continue;
        const start = cursor.segment.record.first_chunk;
        parts.push({ words: head.words, from: head.from, to: head.to, shift: start - first, first: start });
        words += head.to - head.from;
        cursor.pop();
      }
      if (scratch.length < words) scratch = new Uint32Array(Math.max(words, scratch.length * 2));
      const end = mergeInto(parts, dead, dropped, scratch, 0);
      stepBytes += end * 4;
      if (end > 0) {
        postings += end / 2;
        pages.add(term, new Uint8Array(scratch.buffer, 0, end * 4));
      }
      terms += 1;
      if (pending.length >= WRITE_SLICE || pendingBytes >= WRITE_SLICE_BYTES) {
        write();
        terms = 0;
        stepBytes = 0;
        await this.yieldBetween();
      } else if (terms >= MERGE_STEP || stepBytes >= MERGE_STEP_BYTES) {
        // Reading and merging blocks takes the main thread too: it yields between steps.
        terms = 0;
        stepBytes = 0;
        await this.yieldBetween();
      }
    }
    const directory = pages.finish();
    if (pending.length > 0) write();
    commits.push(this.databases.meta.put(pageDirectoryKey(target.key), directory));
    await Promise.all(commits);
    this.copiedPostings += postings;
    this.writer.transaction(() => {
      const { segments, dead: deadDb } = this.databases;
      const current = segments.get(target.key);
      if (current?.state !== 'building') return;
      segments.put(target.key, { ...current, postings, state: 'live' });
      for (const source of sources) segments.put(source.key, { ...source.record, state: 'retired' });
      for (const chunk of dropped) deadDb.remove(chunk);
    });
    await this.yieldBetween();
    return true;
  }

  /** The oldest MERGE_FACTOR live segments of a full tier, marked as merging, and the segment they become. */
  private pick(): { target: Named; sources: Named[] } | undefined {
    const { segments } = this.databases;
    const tiers = new Map<string, Named[]>();
    for (const { key, value } of segments.getRange()) {
      if (value.state !== 'live') continue;
      const group = `${value.code}\u0000${tierOf(value.postings)}`;
      const list = tiers.get(group) ?? [];
      list.push({ key, record: value });
      tiers.set(group, list);
    }
    for (const list of tiers.values()) {
      if (list.length < MERGE_FACTOR) continue;
      const sources = list.slice(0, MERGE_FACTOR);
      let first = Number.POSITIVE_INFINITY;
      let end = 0;
      let postings = 0;
      for (const source of sources) {
        first = Math.min(first, source.record.first_chunk);
        end = Math.max(end, source.record.first_chunk + source.record.span);
        postings += source.record.postings;
        segments.put(source.key, { ...source.record, state: 'merging', pid: process.pid });
      }
      const key = segmentKeyFor(this.writer.advance('segment_sequence', 1));
      const record: SegmentRecord = {
        state: 'building',
        origin: 'merge',
        code: (sources[0] as Named).record.code,
        first_chunk: first,
        span: end - first,
        postings,
        pid: process.pid,
      };
      segments.put(key, record);
      return { target: { key, record }, sources };
    }
    return undefined;
  }

  /** Takes an abandoned ingestion's applied document frequencies back out of rag-df, last terms first. */
  private async takeBackFrequencies(key: string): Promise<void> {
    const { segments, meta } = this.databases;
    const stored = meta.get(segmentTermsKey(key)) as SegmentTerms | undefined;
    const terms = stored?.terms.split('\n') ?? [];
    for (;;) {
      if (this.closed) return;
      const done = this.writer.transaction(() => {
        const record = segments.get(key);
        const applied = record?.df_applied ?? 0;
        if (!record || applied === 0 || !stored) return true;
        const from = Math.max(0, applied - WRITE_SLICE);
        const changes = new Map<string, number>();
        for (let index = from; index < applied; index += 1) changes.set(terms[index] as string, -segmentTermCount(stored, index));
        this.writer.applyFrequencies(changes);
        segments.put(key, { ...record, df_applied: from });
        return false;
      });
      if (done) break;
      await this.yieldBetween();
    }
    this.writer.transaction(() => meta.remove(segmentTermsKey(key)));
  }

  /** Removes retired segments' blocks, and abandoned ingestions' chunks too, a slice at a time. */
  private async sweep(): Promise<void> {
    const { segments, blocks, chunks, vectors } = this.databases;
    const doomed = Array.from(segments.getRange(), ({ key, value }) => ({ key, record: value })).filter(
      ({ record }) => record.state === 'retired' || record.state === 'abandoned',
    );
    for (const { key, record } of doomed) {
      if (record.state === 'abandoned') await this.takeBackFrequencies(key);
      for (;;) {
        if (this.closed) return;
        const keys = Array.from(blocks.getKeys({ ...segmentBlockRange(key), limit: WRITE_SLICE }));
        if (keys.length === 0) break;
        // Asynchronous removes, committed on lmdb-js's write thread (nothing reads a retired segment's blocks).
        // Every remove is awaited, so a failed commit rejects here instead of going unhandled.
        const removed = Promise.all(keys.map((blockKeyToRemove) => blocks.remove(blockKeyToRemove)));
        this.writer.counters.transactions += 1;
        await removed;
      }
      if (record.state === 'abandoned') {
        const { documentTerms } = this.databases;
        const termKeys = Array.from(documentTerms.getKeys({ start: `${key}\u0000`, end: `${key}\u0001` }));
        this.writer.transaction(() => {
          for (const termKey of termKeys) documentTerms.remove(termKey);
        });
        // An ingestion that never published owns its chunk numbers: nothing else refers to them.
        for (let start = record.first_chunk; start < record.first_chunk + record.span; start += WRITE_SLICE) {
          const end = Math.min(record.first_chunk + record.span, start + WRITE_SLICE);
          this.writer.transaction(() => {
            for (let chunk = start; chunk < end; chunk += 1) {
              chunks.remove(chunk);
              vectors.remove(vectorKey(record.code, chunk));
            }
          });
          await this.yieldBetween();
        }
      }
      this.writer.transaction(() => {
        this.databases.meta.remove(pageDirectoryKey(key));
        segments.remove(key);
      });
    }
  }
}
