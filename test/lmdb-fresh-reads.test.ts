/**
 * A request's reads see what other processes committed before it came. lmdb-js serves reads from
 * one snapshot until a timer of its own renews it, so without a fresh snapshot a key created
 * through one worker (or the CLI) a moment ago could be refused by another worker. Real LMDB on
 * disk, the other writer a real second process.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import type { HttpContext } from '../src/http/types.js';
import { identify, requireAdmin } from '../src/routes/admit.js';
import type { Services } from '../src/services.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbApiKeyStore } from '../src/store/lmdb-keys.js';
import type { ApiKeyRecord } from '../src/store/types.js';
import { scratchDirectories } from './helpers/scratch.js';

const scratch = scratchDirectories('fresh');

function keyRecord(keyId: string): ApiKeyRecord {
  return {
    key_id: keyId,
    user_id: 'ada',
    hash: new Uint8Array(32),
    name: undefined,
    created: new Date().toISOString(),
    last_used: undefined,
    revoked_at: undefined,
  };
}

/** Adds a key from a second process and waits for it: this process's event loop does not turn meanwhile. */
function addKeyFromAnotherProcess(directory: string, keyId: string): void {
  const module = (name: string) => JSON.stringify(new URL(`../src/store/${name}`, import.meta.url).href);
  const record = JSON.stringify(keyRecord(keyId));
  execFileSync(process.execPath, [
    '--input-type=module',
    '-e',
    `const { LmdbStorage } = await import(${module('lmdb.js')});
     const { LmdbApiKeyStore } = await import(${module('lmdb-keys.js')});
     const storage = new LmdbStorage(${JSON.stringify(directory)});
     await new LmdbApiKeyStore(storage).add({ ...${record}, hash: new Uint8Array(32) });
     await storage.close();`,
  ]);
}

describe('reads that follow freshen() see other processes’ commits', () => {
  it('finds a key another process created after this one took its read snapshot, which the old snapshot misses', async () => {
    const directory = scratch();
    const storage = new LmdbStorage(directory);
    const keys = new LmdbApiKeyStore(storage);
    try {
      await keys.add(keyRecord('key-here'));
      // This read takes the snapshot lmdb-js keeps until its timer turns; nothing below lets a timer run.
      assert.ok(await keys.get('key-here'));
      addKeyFromAnotherProcess(directory, 'key-there');
      assert.equal(await keys.get('key-there'), undefined, 'the snapshot taken before the other commit does not hold it');
      storage.freshen();
      assert.equal((await keys.get('key-there'))?.user_id, 'ada');
    } finally {
      await storage.close();
    }
  });

  it('freshens the storage as a request is identified, before the caller is looked up', async () => {
    const calls: string[] = [];
    const caller = { kind: 'anonymous', id: 'anon:127.0.0.1', plan: 'free' } as const;
    const services = {
      storage: { freshen: () => calls.push('freshen') },
      auth: {
        caller: async () => {
          calls.push('caller');
          return caller;
        },
        admin: async () => {
          calls.push('admin');
          return caller;
        },
      },
    } as unknown as Services;
    const context = { request: { headers: {}, clientAddress: '127.0.0.1' } } as unknown as HttpContext;
    await identify(services, context);
    await requireAdmin(services, context);
    assert.deepEqual(calls, ['freshen', 'caller', 'freshen', 'admin']);
  });
});
