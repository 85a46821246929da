/**
 * Usage records in LMDB ride the commit of the next quota take instead of costing a commit of
 * their own; with no take to ride they are written alone a few milliseconds later. Readers and a
 * graceful close see every record, on a real LMDB environment on disk.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbQuotaCounters } from '../src/store/lmdb-quota.js';
import { LmdbUsageStore } from '../src/store/lmdb-usage.js';
import type { UsageRecord } from '../src/store/types.js';
import { scratchDirectories } from './helpers/scratch.js';

const scratch = scratchDirectories('deferred');

function usageRecord(time: number, subject = 'user:ada'): UsageRecord {
  return { time, subject, key_id: null, model: 'builtin', route: '/api/chat/', input_tokens: 3, output_tokens: 5, status: 200 };
}

/** Transactions committed on the environment so far. */
function lastTransaction(storage: LmdbStorage): number {
  return (storage.root.getStats() as { lastTxnId: number }).lastTxnId;
}

async function all(records: Iterable<UsageRecord> | AsyncIterable<UsageRecord>): Promise<UsageRecord[]> {
  const list: UsageRecord[] = [];
  for await (const record of records) list.push(record);
  return list;
}

/**
 * Writes a usage record (and takes a unit, given the counters) once: the first record of a shape
 * in a database also saves that shape (its shared structure) in a commit of its own, once.
 */
async function firstOfEachShape(usage: LmdbUsageStore, counters?: LmdbQuotaCounters): Promise<void> {
  await usage.record(usageRecord(500));
  if (counters) await (await counters.take('user:ada', { start: 0, lengthMs: 86_400_000 }, 10, 1)).durable;
}

/** A new store with usage records and quota counters, each shape already written once. */
async function primedStore(): Promise<{ storage: LmdbStorage; usage: LmdbUsageStore; counters: LmdbQuotaCounters }> {
  const storage = new LmdbStorage(scratch());
  const usage = new LmdbUsageStore(storage);
  const counters = new LmdbQuotaCounters(storage);
  await firstOfEachShape(usage, counters);
  return { storage, usage, counters };
}

describe('usage records in LMDB', () => {
  it('ride the commit of the next quota take: a record and a take cost one transaction', async () => {
    const { storage, usage, counters } = await primedStore();
    const before = lastTransaction(storage);
    const written = usage.record(usageRecord(1_000));
    // The next request arrives a turn later, as it does under load.
    await new Promise((resolve) => setImmediate(resolve));
    const take = await counters.take('user:ada', { start: 0, lengthMs: 86_400_000 }, 10, 1);
    await Promise.all([take.durable, written]);
    assert.equal(take.ok, true);
    assert.equal(lastTransaction(storage) - before, 1);
    assert.deepEqual(
      (await all(usage.range(0, 2_000, 'user:ada'))).map((record) => record.time),
      [500, 1_000],
    );
    await storage.close();
  });

  it('keep riding the takes while requests keep coming, for longer than the wait for a take', async () => {
    const { storage, usage, counters } = await primedStore();
    const before = lastTransaction(storage);
    const rounds = 60;
    const written: Promise<void>[] = [];
    const takes: Promise<unknown>[] = [];
    // A request every 2 ms or so, for over ten times the 10 ms a record waits for a take.
    for (let round = 0; round < rounds; round += 1) {
      written.push(usage.record(usageRecord(1_000 + round)));
      await new Promise((resolve) => setTimeout(resolve, 2));
      const take = await counters.take('user:ada', { start: 0, lengthMs: 86_400_000 }, 100, 1);
      assert.equal(take.ok, true);
      takes.push(take.durable);
    }
    await Promise.all([...written, ...takes]);
    const alone = lastTransaction(storage) - before - rounds;
    // A stall of a busy machine may leave a few records waiting past 10 ms; records that stopped
    // riding the takes would be written alone nearly every round.
    assert.ok(alone <= rounds / 10, `${alone} of ${rounds} records were written on their own`);
    assert.equal((await all(usage.range(0, 5_000, 'user:ada'))).length, rounds + 1);
    await storage.close();
  });

  it('are written on their own within a few milliseconds when no take comes', async () => {
    const storage = new LmdbStorage(scratch());
    const usage = new LmdbUsageStore(storage);
    await firstOfEachShape(usage);
    const before = lastTransaction(storage);
    const asked = performance.now();
    await Promise.all([usage.record(usageRecord(1_000)), usage.record(usageRecord(1_001))]);
    assert.ok(performance.now() - asked < 1_000);
    // Both in one commit, readable without anything settling them first.
    assert.equal(lastTransaction(storage) - before, 1);
    assert.equal([...storage.database('usage').getKeys()].length, 3);
    await storage.close();
  });

  it('are seen by a reader at once and kept by a graceful close', async () => {
    const directory = scratch();
    const storage = new LmdbStorage(directory);
    const usage = new LmdbUsageStore(storage);
    void usage.record(usageRecord(1_000));
    assert.equal((await all(usage.range(0, 5_000, undefined))).length, 1);
    void usage.record(usageRecord(2_000, 'user:bob'));
    await storage.close();

    const reopened = new LmdbStorage(directory);
    const exported = await all(new LmdbUsageStore(reopened).exportRecords());
    assert.deepEqual(exported.map((record) => [record.subject, record.time]).sort(), [
      ['user:ada', 1_000],
      ['user:bob', 2_000],
    ]);
    await reopened.close();
  });
});
