/**
 * Usage history in Redis: every record is one member of the sorted set `usage` (everyone's, by
 * time) and of `usage:{subject}` (one caller's), scored by its time in epoch ms. A member is the
 * record as JSON with a per-process sequence, so two records of one millisecond stay apart.
 * A range is read in pages of ZRANGE BYSCORE; the sweep removes whole pages of old members.
 */
import { randomBytes } from 'node:crypto';
import type { RedisStorage } from './redis.js';
import { type RecordTransfer, USAGE_SCAN_LIMIT, type UsageRecord, type UsageStore } from './types.js';

/** Members read per round trip. */
const PAGE = 1000;

type StoredRecord = UsageRecord & { n: string };

export class RedisUsageStore implements UsageStore, RecordTransfer<UsageRecord> {
  /** This process's tag and counter: members of one millisecond from any nodes differ. */
  private readonly tag = randomBytes(4).toString('hex');
  private sequence = 0;

  constructor(private readonly storage: RedisStorage) {}

  private subjectKey(subject: string): string {
    return this.storage.key(`usage:${encodeURIComponent(subject)}`);
  }

  async record(entry: UsageRecord): Promise<void> {
    const member = JSON.stringify({ ...entry, n: `${this.tag}.${this.sequence++}` } satisfies StoredRecord);
    await this.storage.call((client) =>
      client
        .multi()
        .zAdd(this.storage.key('usage'), { score: entry.time, value: member })
        .zAdd(this.subjectKey(entry.subject), { score: entry.time, value: member })
        .exec(),
    );
  }

  async *range(from: number, to: number, subject: string | undefined, limit = USAGE_SCAN_LIMIT): AsyncGenerator<UsageRecord> {
    const key = subject === undefined ? this.storage.key('usage') : this.subjectKey(subject);
    let offset = 0;
    while (offset < limit) {
      const count = Math.min(PAGE, limit - offset);
      // `to` is exclusive: "(" makes the bound open.
      const page = await this.storage.call((client) => client.zRangeByScore(key, from, `(${to}`, { LIMIT: { offset, count } }));
      for (const member of page) {
        const { n: _sequence, ...record } = JSON.parse(member) as StoredRecord;
        yield record;
      }
      if (page.length < count) return;
      offset += page.length;
    }
  }

  async sweep(before: number): Promise<number> {
    let removed = 0;
    for (;;) {
      const old = await this.storage.call((client) =>
        client.zRangeByScore(this.storage.key('usage'), '-inf', `(${before}`, { LIMIT: { offset: 0, count: PAGE } }),
      );
      if (old.length === 0) return removed;
      await this.storage.call((client) => {
        const batch = client.multi();
        for (const member of old) {
          const { subject } = JSON.parse(member) as StoredRecord;
          batch.zRem(this.subjectKey(subject), member);
        }
        batch.zRem(this.storage.key('usage'), old);
        return batch.exec();
      });
      removed += old.length;
    }
  }

  /** Every record, oldest first, in pages. */
  exportRecords(): AsyncGenerator<UsageRecord> {
    return this.range(0, Number.MAX_SAFE_INTEGER, undefined, Number.POSITIVE_INFINITY);
  }

  importRecord(record: UsageRecord): Promise<void> {
    return this.record(record);
  }
}
