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

const noop = (): void => undefined;

/** The LMDB-backed quota counters. */
export class LmdbQuotaCounters implements QuotaCounterStore {
  private readonly db: Database<Counter, string>;

  constructor(storage: LmdbStorage) {
    this.db = storage.database<Counter, string>('quota');
  }

  take(subject: string, windowStart: number, limit: number, cost: number): Promise<CounterTake> {
    // The read happens inside the write transaction: LMDB holds its single writer lock (shared by
    // every process on the environment) from this read to the commit, so no other take interleaves.
    // The decision is handed out as soon as the transaction body ran, with `durable` resolving
    // after the commit reached the disk: the caller starts upstream work during the fsync and
    // sends nothing before it, so an acknowledged take is never lost.
    return new Promise<CounterTake>((resolve, reject) => {
      const decision = { ok: false, used: 0, durable: Promise.resolve() };
      let decided = false;
      decision.durable = this.db
        .transaction(() => {
          const current = this.db.get(subject);
          const used = current !== undefined && current.window_start === windowStart ? current.used : 0;
          decision.ok = used + cost <= limit;
          decision.used = decision.ok ? used + cost : used;
          if (decision.ok && cost > 0) this.db.put(subject, { window_start: windowStart, used: decision.used });
          decided = true;
          // lmdb-js runs this body in its write batch, after `durable` was assigned; a waiter resumes later still.
          resolve(decision);
        })
        .then(noop);
      decision.durable.catch((error: unknown) => {
        if (!decided) reject(error);
      });
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
