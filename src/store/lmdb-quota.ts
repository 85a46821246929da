/**
 * Quota counters in LMDB: sub-database `quota`, subject → {window_start, used}. A counter whose
 * window_start is older than the current window counts as zero, so windows roll over without any
 * sweeping job.
 */
import type { Database } from 'lmdb';
import type { CounterTake, QuotaCounterStore } from './types.js';
import type { LmdbStorage } from './lmdb.js';

interface Counter {
  window_start: number;
  used: number;
}

/** The LMDB-backed quota counters. */
export class LmdbQuotaCounters implements QuotaCounterStore {
  private readonly db: Database<Counter, string>;

  constructor(storage: LmdbStorage) {
    this.db = storage.database<Counter, string>('quota');
  }

  take(subject: string, windowStart: number, limit: number, cost: number): Promise<CounterTake> {
    // The read happens inside the write transaction: LMDB holds its single writer lock (shared by
    // every process on the environment) from this read to the commit, so no other take interleaves.
    // The promise resolves after the commit, so a success is never handed out before it is durable.
    return this.db.transaction(() => {
      const current = this.db.get(subject);
      const used = current !== undefined && current.window_start === windowStart ? current.used : 0;
      if (used + cost > limit) return { ok: false, used };
      if (cost > 0) this.db.put(subject, { window_start: windowStart, used: used + cost });
      return { ok: true, used: used + cost };
    });
  }

  giveBack(subject: string, windowStart: number, cost: number): Promise<number | undefined> {
    return this.db.transaction(() => {
      const current = this.db.get(subject);
      if (current === undefined || current.window_start !== windowStart) return undefined;
      const used = Math.max(0, current.used - Math.max(0, cost));
      if (used !== current.used) this.db.put(subject, { window_start: windowStart, used });
      return used;
    });
  }

  used(subject: string, windowStart: number): number {
    const current = this.db.get(subject);
    return current !== undefined && current.window_start === windowStart ? current.used : 0;
  }
}
