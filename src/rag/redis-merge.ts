/**
 * Background upkeep of the knowledge base on Redis (redis-index.ts): tiered merges as in merge.ts
 * (MERGE_FACTOR live segments of one collection and tier become one segment, dropping the postings
 * of deleted chunks) and the removal of segments an ingestion left unpublished.
 *
 * One node merges at a time: a pass holds `rag:merge-lock` (SET NX PX with a random token,
 * released only by its holder). The merged segment is written under keys no query reads and
 * swapped in by one script (redis-scripts.ts SWAP), which refuses when a source is no longer live,
 * so even a lock that expired mid-merge cannot make two merges of the same segments visible.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import { segmentKeyFor, type SegmentRecord } from './index-store.js';
import { MERGE_FACTOR, tierOf } from './merge.js';
import { mergeBlocks } from './postings.js';
import type { RedisCommands } from './redis-commands.js';
import { SWAP, UNLOCK } from './redis-scripts.js';
import { BackgroundPasses } from './background-passes.js';

/** How long a merge pass may hold the lock before another node may take it (ms). */
const LOCK_MS = 60_000;
/** An unpublished segment older than this was left by a node that stopped mid-write (ms). */
const STALE_BUILDING_MS = 10 * 60_000;

/** A segment record as stored on Redis: the LMDB record plus what an unpublished one needs for clean-up. */
export interface RedisSegmentRecord extends SegmentRecord {
  /** When an unpublished segment was started (ms). */
  started?: number;
  /** Documents an unpublished ingestion writes. */
  documents?: string[];
}

interface Named {
  key: string;
  record: RedisSegmentRecord;
}

export class RedisMerger extends BackgroundPasses {
  copiedPostings = 0;

  constructor(
    private readonly redis: RedisCommands,
    private readonly logger: Logger | undefined,
  ) {
    super();
  }

  /** Redis away or a node's lock lost: the next write schedules another pass. */
  protected failed(error: unknown): void {
    this.logger?.warn({ err: error }, 'knowledge-base merge stopped');
  }

  /** Every segment, ordered by key (the order they were made). */
  async segments(): Promise<RedisSegmentRecord[]> {
    return (await this.named()).map(({ record }) => record);
  }

  private async named(): Promise<Named[]> {
    const all = await this.redis.entries(this.redis.key('segments'));
    const named = all.map(([key, value]): Named => ({ key, record: JSON.parse(value) as RedisSegmentRecord }));
    return named.sort((left, right) => (left.key < right.key ? -1 : 1));
  }

  /** Under the lock: removes stale unpublished segments, then merges while a tier is full. */
  protected async pass(): Promise<void> {
    const token = randomUUID();
    const locked = await this.redis.send<string | null>(['SET', this.redis.key('merge-lock'), token, 'NX', 'PX', String(LOCK_MS)]);
    if (locked !== 'OK') return;
    try {
      const now = Date.now();
      for (const { key, record } of await this.named()) {
        if (record.state === 'building' && (record.started ?? 0) < now - STALE_BUILDING_MS) await this.discard(key);
      }
      while (!this.closed && (await this.mergeOnce())) {}
    } finally {
      await this.redis.script(UNLOCK, ['merge-lock', token]);
    }
  }

  /** Merges the oldest MERGE_FACTOR live segments of one full tier; false when no tier is full. */
  private async mergeOnce(): Promise<boolean> {
    const tiers = new Map<string, Named[]>();
    for (const named of await this.named()) {
      if (named.record.state !== 'live') continue;
      const group = `${named.record.code}\u0000${tierOf(named.record.postings)}`;
      const list = tiers.get(group) ?? [];
      list.push(named);
      tiers.set(group, list);
    }
    const sources = [...tiers.values()].find((list) => list.length >= MERGE_FACTOR)?.slice(0, MERGE_FACTOR);
    if (!sources) return false;
    const first = Math.min(...sources.map((source) => source.record.first_chunk));
    const end = Math.max(...sources.map((source) => source.record.first_chunk + source.record.span));
    const sequence = await this.redis.send<number>(['HINCRBY', this.redis.key('meta'), 'segment_sequence', '1']);
    const target = segmentKeyFor(sequence);
    const record: RedisSegmentRecord = {
      state: 'building',
      origin: 'merge',
      code: (sources[0] as Named).record.code,
      first_chunk: first,
      span: end - first,
      postings: 0,
      pid: process.pid,
      started: Date.now(),
    };
    await this.redis.send(['HSET', this.redis.key('segments'), target, JSON.stringify(record)]);
    try {
      const { postings, dropped } = await this.copyBlocks(sources, target, first);
      const swapped = await this.redis.script<number>(SWAP, [
        target,
        String(postings),
        sources.map((source) => source.key).join(','),
        ...[...dropped].map(String),
      ]);
      if (swapped !== 1) await this.discard(target);
      else this.copiedPostings += postings;
      return swapped === 1;
    } catch (error) {
      await this.discard(target).catch(() => undefined);
      throw error;
    }
  }

  /** Writes the sources' blocks, concatenated per term in chunk order without dead chunks, as the target's. */
  private async copyBlocks(sources: readonly Named[], target: string, first: number): Promise<{ postings: number; dropped: Set<number> }> {
    const parts = new Map<string, Array<{ block: Uint8Array; shift: number; first: number }>>();
    const ordered = [...sources].sort((left, right) => left.record.first_chunk - right.record.first_chunk);
    for (const source of ordered) {
      for (const [term, block] of await this.redis.entries<Buffer>(this.redis.key(`blocks:${source.key}`), true)) {
        const list = parts.get(term) ?? [];
        list.push({ block, shift: source.record.first_chunk - first, first: source.record.first_chunk });
        parts.set(term, list);
      }
    }
    const dead = new Set((await this.redis.send<string[]>(['SMEMBERS', this.redis.key('dead')])).map(Number));
    const dropped = new Set<number>();
    const blocks: Array<[string, Buffer]> = [];
    let postings = 0;
    for (const [term, list] of parts) {
      const merged = mergeBlocks(list, dead, dropped);
      if (merged.byteLength === 0) continue;
      postings += merged.byteLength / 8;
      blocks.push([term, Buffer.from(merged.buffer, merged.byteOffset, merged.byteLength)]);
    }
    await this.redis.hashSet(this.redis.key(`blocks:${target}`), blocks);
    return { postings, dropped };
  }

  /**
   * Removes an unpublished segment and what it wrote: its blocks and frequencies, and for an
   * ingestion its chunks, vectors and term lists (nothing else refers to its chunk numbers).
   */
  async discard(segment: string): Promise<void> {
    const stored = await this.redis.send<string | null>(['HGET', this.redis.key('segments'), segment]);
    const record = stored ? (JSON.parse(stored) as RedisSegmentRecord) : undefined;
    if (record?.state !== 'building') return;
    await this.redis.send(['UNLINK', this.redis.key(`blocks:${segment}`), this.redis.key(`seg-terms:${segment}`)]);
    if (record.origin === 'ingest') {
      const numbers = Array.from({ length: record.span }, (_, index) => String(record.first_chunk + index));
      for (let from = 0; from < numbers.length; from += 1000) {
        const slice = numbers.slice(from, from + 1000);
        await this.redis.send(['HDEL', this.redis.key('chunks'), ...slice]);
        await this.redis.send(['HDEL', this.redis.key(`vecs:${record.code}`), ...slice]);
      }
      const termKeys = (record.documents ?? []).map((id) => `${segment}\u0000${id}`);
      if (termKeys.length > 0) await this.redis.send(['HDEL', this.redis.key('doc-terms'), ...termKeys]);
    }
    await this.redis.send(['HDEL', this.redis.key('segments'), segment]);
  }
}
