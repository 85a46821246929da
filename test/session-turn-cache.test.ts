import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbSessionStore, TRIM_BATCH } from '../src/store/lmdb-sessions.js';
import { FrequencySketch, SessionTurnCache } from '../src/store/session-turn-cache.js';
import type { SessionMessage } from '../src/store/types.js';

const MAX_TURNS = 4;

let scratch: string;
let storage: LmdbStorage;
/** Two stores on one environment, each with its own cache: two worker processes sharing the data directory. */
let first: LmdbSessionStore;
let second: LmdbSessionStore;
/** A store that caches nothing: what the environment really holds. */
let uncached: LmdbSessionStore;

function turn(role: 'user' | 'assistant', content: string): SessionMessage {
  return { role, content, timestamp: new Date().toISOString() };
}

async function contents(store: LmdbSessionStore, sessionId: string, limit?: number): Promise<string[] | undefined> {
  return (await store.get('owner', sessionId, limit))?.messages.map((message) => message.content);
}

before(() => {
  scratch = mkdtempSync(join(tmpdir(), 'colloquy-turn-cache-'));
  storage = new LmdbStorage(scratch);
  first = new LmdbSessionStore(storage, MAX_TURNS);
  second = new LmdbSessionStore(storage, MAX_TURNS);
  uncached = new LmdbSessionStore(storage, MAX_TURNS, 0);
});

after(async () => {
  await storage.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('cached session turns', () => {
  test('a read after appends by the same store matches what is stored, through trimming and oversized appends', async () => {
    const expected: string[] = [];
    for (const batch of [['a', 'b'], ['c', 'd'], ['e'], ['f', 'g', 'h', 'i', 'j', 'k'], ['l', 'm']]) {
      await contents(first, 'own');
      await first.append(
        'owner',
        'own',
        batch.map((content) => turn('user', content)),
      );
      expected.push(...batch);
      const kept = expected.slice(-MAX_TURNS);
      assert.deepEqual(await contents(first, 'own'), kept);
      assert.deepEqual(await contents(uncached, 'own'), kept);
      assert.deepEqual(await contents(first, 'own', 2), kept.slice(-2));
    }
  });

  test('turns past the cap are never read, listed or exported, and leave storage a batch at a time', async () => {
    const stored = storage.database<SessionMessage, [string, string, number]>('session-messages', { sharedStructures: true });
    const storedTurns = () => stored.getKeysCount({ start: ['owner', 'long', 0], end: ['owner', 'long', Number.MAX_SAFE_INTEGER] });
    const appended: string[] = [];
    let trimmed = false;
    let lingered = false;
    for (let index = 0; index < 3 * TRIM_BATCH; index++) {
      // Two processes take turns appending, each reading through its own cache first.
      const store = index % 3 === 0 ? second : first;
      await contents(store, 'long');
      await store.append('owner', 'long', [turn('user', `turn ${index}`)]);
      appended.push(`turn ${index}`);
      const kept = appended.slice(-MAX_TURNS);
      for (const reader of [first, second, uncached]) assert.deepEqual(await contents(reader, 'long'), kept);
      assert.deepEqual(await contents(first, 'long', 2), kept.slice(-2));
      assert.equal((await first.get('owner', 'long'))?.message_count, kept.length);
      assert.equal((await first.list('owner', 10)).find((summary) => summary.session_id === 'long')?.message_count, kept.length);
      const count = storedTurns();
      assert.ok(count < MAX_TURNS + TRIM_BATCH, `${count} turns stored after ${appended.length} appends`);
      if (count < appended.length) trimmed = true;
      if (count > MAX_TURNS) lingered = true;
    }
    assert.ok(trimmed, 'turns past the cap were removed from storage');
    assert.ok(lingered, 'turns past the cap waited for a batch');
    const exported = [];
    for await (const session of first.exportRecords()) if (session.session_id === 'long') exported.push(session);
    assert.equal(exported.length, 1);
    assert.deepEqual(
      exported[0]!.messages.map((message) => message.content),
      appended.slice(-MAX_TURNS),
    );
    assert.equal(exported[0]!.first, appended.length - MAX_TURNS);
    assert.equal(exported[0]!.next, appended.length);
    assert.equal(await first.delete('owner', 'long'), true);
    assert.equal(storedTurns(), 0);
  });

  test('a cap raised later does not bring back turns dropped under the lower one', async () => {
    for (let index = 0; index < MAX_TURNS + 3; index++) await first.append('owner', 'raised', [turn('user', `turn ${index}`)]);
    const wider = new LmdbSessionStore(storage, MAX_TURNS * 4, 0);
    const kept = Array.from({ length: MAX_TURNS }, (_, index) => `turn ${index + 3}`);
    assert.deepEqual(await contents(wider, 'raised'), kept);
    await wider.append('owner', 'raised', [turn('user', 'wider')]);
    assert.deepEqual(await contents(wider, 'raised'), [...kept, 'wider']);
    assert.deepEqual(await contents(first, 'raised'), [...kept.slice(1), 'wider']);
  });

  test('an append by another process is seen at the next read, never the cached turns', async () => {
    await first.append('owner', 'shared', [turn('user', 'q1'), turn('assistant', 'a1')]);
    assert.deepEqual(await contents(first, 'shared'), ['q1', 'a1']);
    await second.append('owner', 'shared', [turn('user', 'q2'), turn('assistant', 'a2')]);
    assert.deepEqual(await contents(first, 'shared'), ['q1', 'a1', 'q2', 'a2']);
    await first.append('owner', 'shared', [turn('user', 'q3')]);
    assert.deepEqual(await contents(first, 'shared'), ['a1', 'q2', 'a2', 'q3']);
    assert.deepEqual(await contents(second, 'shared'), ['a1', 'q2', 'a2', 'q3']);
  });

  test('a session deleted and created again by another process is read anew', async () => {
    await first.append('owner', 'again', [turn('user', 'old question'), turn('assistant', 'old answer')]);
    assert.deepEqual(await contents(first, 'again'), ['old question', 'old answer']);
    assert.equal(await second.delete('owner', 'again'), true);
    assert.equal(await first.get('owner', 'again'), undefined);
    await first.append('owner', 'again', [turn('user', 'seed')]);
    assert.deepEqual(await contents(first, 'again'), ['seed']);
    // Created again at once with as many turns: the same sequence numbers, often the same millisecond.
    for (let round = 0; round < 20; round++) {
      assert.equal(await second.delete('owner', 'again'), true);
      await second.append('owner', 'again', [turn('user', `fresh ${round}`)]);
      assert.deepEqual(await contents(first, 'again'), [`fresh ${round}`]);
    }
  });

  test('a cache too small for a session still reads it whole from storage', async () => {
    const tiny = new LmdbSessionStore(storage, MAX_TURNS, 100);
    await tiny.append('owner', 'large', [turn('user', 'x'.repeat(500)), turn('assistant', 'y'.repeat(500))]);
    assert.deepEqual(await contents(tiny, 'large'), ['x'.repeat(500), 'y'.repeat(500)]);
    assert.deepEqual(await contents(tiny, 'large'), ['x'.repeat(500), 'y'.repeat(500)]);
  });
});

describe('which sessions the cache keeps when more are in use than fit', () => {
  const version = { created: 'c', updated: 'u', first: 0, next: 1 };
  /** One turn of `chars` characters in all (the cache counts 64 more per turn than its content). */
  function turnsOf(chars: number): SessionMessage[] {
    return [{ role: 'user', content: 'x'.repeat(chars - 64), timestamp: 't' }];
  }
  /** Reads `key` as the store does: the cached turns, or a miss that is then remembered. */
  function read(cache: SessionTurnCache, key: string): boolean {
    if (cache.turns(key, version, 0)) return true;
    cache.remember(key, version, turnsOf(1000));
    return false;
  }

  test('sessions asked for in turn, twice as many as fit, are still found about half the time', () => {
    const cache = new SessionTurnCache(100 * 1000);
    const keys = Array.from({ length: 200 }, (_, index) => `session-${index}`);
    let hits = 0;
    for (let round = 0; round < 20; round++) {
      for (const key of keys) if (read(cache, key) && round >= 10) hits += 1;
    }
    // Least-recently-used alone evicts, at every miss, the session asked for next: no hit at all.
    assert.ok(hits >= 0.4 * 10 * keys.length, `hits in the last ten rounds: ${hits} of ${10 * keys.length}`);
  });

  test('a session asked for often takes the place of one asked for once', () => {
    const cache = new SessionTurnCache(10 * 1000);
    for (let index = 0; index < 10; index++) read(cache, `cold-${index}`);
    // Full: a session seen once does not displace the others...
    assert.equal(read(cache, 'hot'), false);
    assert.equal(cache.turns('hot', version, 0), undefined);
    // ...but one asked for again and again does, in place of the least recently used.
    for (let attempt = 0; attempt < 3; attempt++) read(cache, 'hot');
    assert.ok(cache.turns('hot', version, 0));
    assert.equal(cache.turns('cold-0', version, 0), undefined);
    assert.ok(cache.turns('cold-9', version, 0));
  });
});

describe('the frequency sketch', () => {
  test('counts accesses per key, never fewer than made, and forgets as it halves', () => {
    const sketch = new FrequencySketch();
    for (let index = 0; index < 5; index++) sketch.add('often');
    sketch.add('once');
    assert.ok(sketch.frequency('often') >= 5);
    assert.ok(sketch.frequency('once') >= 1);
    assert.equal(sketch.frequency('never'), 0);
    // 163,840 accesses (ten per counter of a row) halve every counter.
    for (let index = 0; index < 163_840; index++) sketch.add(`filler-${index % 50_000}`);
    assert.ok(sketch.frequency('often') <= 3, `after halving: ${sketch.frequency('often')}`);
  });
});
