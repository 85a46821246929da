/**
 * Usage history in LMDB: one record per quota-counted request, kept `usage_retention_days`.
 * Sub-database `usage` is keyed [subject, time, sequence], so one caller's range is one bounded
 * scan; `usage_by_time` ([time, subject, sequence] → nothing) serves everyone's range and the
 * retention sweep. Writes are not awaited by requests: they ride the next transaction a request
 * starts (a quota take), or go on their own a few milliseconds later (LmdbStorage.defer).
 */
import type { Database } from 'lmdb';
import type { LmdbStorage } from './lmdb.js';
import { entriesInPages } from './lmdb-pages.js';
import { type RecordTransfer, USAGE_SCAN_LIMIT, type UsageRecord, type UsageStore } from './types.js';

type UsageKey = [string, number, number];
type TimeKey = [number, string, number];
type StoredRecord = Omit<UsageRecord, 'time' | 'subject'>;

/** The LMDB-backed usage history. */
export class LmdbUsageStore implements UsageStore, RecordTransfer<UsageRecord> {
  private readonly records: Database<StoredRecord, UsageKey>;
  private readonly byTime: Database<null, TimeKey>;
  private sequence = 0;

  constructor(private readonly storage: LmdbStorage) {
    this.records = storage.database<StoredRecord, UsageKey>('usage', { sharedStructures: true });
    this.byTime = storage.database<null, TimeKey>('usage_by_time');
  }

  /** Adds one record (both keys in one transaction); resolves once written. */
  record(entry: UsageRecord): Promise<void> {
    // Time plus a per-process sequence and the pid keep two records of one millisecond apart.
    const sequence = (process.pid % 65_536) * 1_000_000_000 + (this.sequence++ % 1_000_000_000);
    const { time, subject, ...stored } = entry;
    // Plain puts, not a transaction callback: nothing is read, so the writer thread need not stop
    // for this process's JavaScript to run it. Deferred: every request leaves a record, and one
    // commit of its own per record cost the gateway about a sixth of its CPU per request.
    return this.storage.defer(() =>
      this.records.batch(() => {
        this.records.put([subject, time, sequence], stored);
        this.byTime.put([time, subject, sequence], null);
      }),
    );
  }

  /** The records in [from, to) epoch ms, one subject's or everyone's, oldest first, at most `limit`. */
  async *range(from: number, to: number, subject: string | undefined, limit = USAGE_SCAN_LIMIT): AsyncGenerator<UsageRecord> {
    // Records still waiting to ride a commit are written first, so a reader sees every request answered.
    await this.storage.settleDeferred();
    let count = 0;
    if (subject !== undefined) {
      for (const { key, value } of this.records.getRange({ start: [subject, from], end: [subject, to] })) {
        if (count++ >= limit) return;
        yield { time: key[1], subject, ...value };
      }
      return;
    }
    for (const { key } of this.byTime.getRange({ start: [from], end: [to] })) {
      if (count++ >= limit) return;
      const [time, who, sequence] = key;
      const value = this.records.get([who, time, sequence]);
      if (value) yield { time, subject: who, ...value };
    }
  }

  /** Removes every record older than `before` (epoch ms); resolves to how many went. */
  async sweep(before: number): Promise<number> {
    await this.storage.settleDeferred();
    const old = [...this.byTime.getKeys({ start: [0], end: [before], limit: 100_000 })];
    if (old.length === 0) return 0;
    await this.records.transaction(() => {
      for (const [time, subject, sequence] of old) {
        this.records.remove([subject, time, sequence]);
        this.byTime.remove([time, subject, sequence]);
      }
    });
    return old.length;
  }

  /** Every record, by subject then time. */
  async *exportRecords(): AsyncGenerator<UsageRecord> {
    await this.storage.settleDeferred();
    for await (const { key, value } of entriesInPages(this.records)) yield { time: key[1], subject: key[0], ...value };
  }

  importRecord(record: UsageRecord): Promise<void> {
    return this.record(record);
  }
}
