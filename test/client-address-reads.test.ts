/**
 * Finding the client's address is a system call (uWS asks the kernel for the peer each time), and
 * only an anonymous caller is identified by it: a request with a key or the admin token is
 * identified without it. The real authenticator over real LMDB stores on disk; the request is an
 * HttpContext whose address counts its reads.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAuthenticator } from '../src/auth/authenticator.js';
import { createKey } from '../src/auth/key-service.js';
import type { HttpContext } from '../src/http/types.js';
import { identify, requireAdmin } from '../src/routes/admit.js';
import type { Services } from '../src/services.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbApiKeyStore } from '../src/store/lmdb-keys.js';
import { LmdbUserStore } from '../src/store/lmdb-users.js';

const ADMIN = 'admin-token-for-tests-0123456789';
const PLANS = { free: { quota: 50, window_seconds: 86_400 }, pro: { quota: 2000, window_seconds: 86_400 } };

/** A request from 203.0.113.7 with these headers, and how often its address was read. */
function request(headers: Record<string, string>): { context: HttpContext; reads: () => number } {
  let reads = 0;
  const context = {
    request: {
      headers,
      get clientAddress() {
        reads += 1;
        return '203.0.113.7';
      },
    },
  } as unknown as HttpContext;
  return { context, reads: () => reads };
}

describe('the client address is read only to identify an anonymous caller', () => {
  // One store for the whole suite (the scratch helper empties its directories after every test).
  const directory = mkdtempSync(join(tmpdir(), 'colloquy-address-reads-'));
  let storage: LmdbStorage;
  let services: Services;
  let key: string;

  before(async () => {
    storage = new LmdbStorage(directory);
    const users = new LmdbUserStore(storage);
    const keys = new LmdbApiKeyStore(storage);
    await users.create('ada', 'pro');
    key = (await createKey(keys, 'ada', undefined)).key;
    const auth = createAuthenticator(
      { adminToken: ADMIN, authRequired: false, anonymousPlan: 'free', defaultPlan: 'free', plans: PLANS },
      users,
      keys,
    );
    services = { storage, auth } as unknown as Services;
  });
  after(async () => {
    await storage.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('identifies a request without Authorization by its address, read once', async () => {
    const { context, reads } = request({});
    const caller = await identify(services, context);
    assert.deepEqual({ kind: caller.kind, id: caller.id, plan: caller.plan }, { kind: 'anonymous', id: 'anon:203.0.113.7', plan: 'free' });
    assert.equal(reads(), 1);
  });

  it('identifies a request with an API key by the key alone, never reading the address', async () => {
    const { context, reads } = request({ authorization: `Bearer ${key}` });
    const caller = await identify(services, context);
    assert.deepEqual({ kind: caller.kind, id: caller.id, plan: caller.plan }, { kind: 'user', id: 'ada', plan: 'pro' });
    assert.equal(reads(), 0);
  });

  it('identifies the admin token, on the chat routes and the admin API, without reading the address', async () => {
    for (const check of [identify, requireAdmin]) {
      const { context, reads } = request({ authorization: `Bearer ${ADMIN}` });
      assert.equal((await check(services, context)).kind, 'admin');
      assert.equal(reads(), 0, check.name);
    }
  });

  it('refuses a wrong key with 401 without reading the address', async () => {
    const { context, reads } = request({ authorization: `Bearer ck_0123456789abcdef_${'B'.repeat(43)}` });
    await assert.rejects(identify(services, context), (error: { code?: string }) => error.code === 'unauthorized');
    assert.equal(reads(), 0);
  });
});
