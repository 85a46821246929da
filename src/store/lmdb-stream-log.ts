/**
 * The event logs of resumable streams in LMDB, so a resume can be served by any process on the
 * data directory: sub-database `stream_meta` (stream id → owner, sequence bounds, bytes, end time)
 * and `stream_events` ([stream id, seq] → one logged event). Each log keeps at most `maxBytes`:
 * past it the oldest events go and `first_seq` moves up. Ended logs are swept after their TTL.
 */
import type { Database } from 'lmdb';
import type { LmdbStorage } from './lmdb.js';
import type { LoggedEvent, StreamLogStore, StreamMeta } from './types.js';

export type { LoggedEvent, StreamMeta };

/** The LMDB-backed stream logs. */
export class LmdbStreamLog implements StreamLogStore {
  private readonly meta: Database<StreamMeta, string>;
  private readonly events: Database<string, [string, number]>;

  constructor(
    storage: LmdbStorage,
    private readonly maxBytes: number,
  ) {
    this.meta = storage.database<StreamMeta, string>('stream_meta');
    this.events = storage.database<string, [string, number]>('stream_events');
  }

  /** Starts a log. */
  create(streamId: string, owner: string): Promise<void> {
    return this.meta.put(streamId, { owner, first_seq: 1, last_seq: 0, bytes: 0, ended_at: null }).then(() => undefined);
  }

  /** Appends events (in order) and drops the oldest past the byte bound; one transaction. */
  append(streamId: string, entries: readonly LoggedEvent[], endedAt?: number): Promise<StreamMeta | undefined> {
    return this.meta.transaction(() => {
      const meta = this.meta.get(streamId);
      if (!meta) return undefined;
      const next = { ...meta };
      for (const entry of entries) {
        this.events.put([streamId, entry.seq], entry.json);
        next.last_seq = entry.seq;
        next.bytes += entry.json.length;
      }
      // The newest window is kept: the oldest events go first, at least the newest one stays.
      while (next.bytes > this.maxBytes && next.first_seq < next.last_seq) {
        const dropped = this.events.get([streamId, next.first_seq]);
        if (dropped !== undefined) {
          next.bytes -= dropped.length;
          this.events.remove([streamId, next.first_seq]);
        }
        next.first_seq += 1;
      }
      if (endedAt !== undefined) next.ended_at = endedAt;
      this.meta.put(streamId, next);
      return next;
    });
  }

  /** Asks the process running the stream to stop it; false when it already ended or is unknown. */
  requestCancel(streamId: string): Promise<boolean> {
    return this.meta.transaction(() => {
      const meta = this.meta.get(streamId);
      if (!meta || meta.ended_at !== null) return false;
      this.meta.put(streamId, { ...meta, cancel_requested: true });
      return true;
    });
  }

  /** The stream's meta, or undefined. */
  async metaOf(streamId: string): Promise<StreamMeta | undefined> {
    return this.meta.get(streamId);
  }

  async cancelsRequested(streamIds: readonly string[]): Promise<string[]> {
    return streamIds.filter((streamId) => this.meta.get(streamId)?.cancel_requested === true);
  }

  /** The kept events after `afterSeq`, oldest first. */
  *after(streamId: string, afterSeq: number): Generator<LoggedEvent> {
    for (const { key, value } of this.events.getRange({ start: [streamId, afterSeq + 1], end: [streamId, Number.MAX_SAFE_INTEGER] })) {
      yield { seq: key[1], json: value };
    }
  }

  /** Nothing to do: a process on this data directory ends its logs or is the one sweeping them. */
  async keepAlive(_streamIds: readonly string[]): Promise<void> {}

  /** Removes the logs that ended before `before` (epoch ms); at most `limit` per call. */
  async sweep(before: number, limit = 1000): Promise<number> {
    const old: string[] = [];
    for (const { key, value } of this.meta.getRange({})) {
      if (value.ended_at !== null && value.ended_at < before) old.push(key);
      if (old.length >= limit) break;
    }
    if (old.length === 0) return 0;
    await this.meta.transaction(() => {
      for (const streamId of old) {
        for (const key of this.events.getKeys({ start: [streamId, 0], end: [streamId, Number.MAX_SAFE_INTEGER] })) this.events.remove(key);
        this.meta.remove(streamId);
      }
    });
    return old.length;
  }
}
