import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbSessionStore } from '../src/store/lmdb-sessions.js';
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
