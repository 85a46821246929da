import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Database } from 'lmdb';
import { createKey } from '../src/auth/key-service.js';
import { loadConfig, type ConfigFile } from '../src/config/index.js';
import { createIdentityServices } from '../src/identity.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { storesOn } from '../src/store/open.js';
import { bootServer, type TestServer } from './helpers/server.js';

/**
 * The quota, usage, key, user and session records keep their property names once per database
 * (lmdb-js's shared structures). A data directory written before that, where every value carries
 * its own record definitions, is served as it was, and the structures entry is never a record.
 */

/** Storage as a build without shared structures wrote it: every sub-database opened plainly. */
class InlineRecordStorage extends LmdbStorage {
  override database<V = unknown, K extends string | number | (string | number)[] = string>(name: string): Database<V, K> {
    return super.database<V, K>(name);
  }
}

const LONG_WINDOW = 10 * 365 * 86_400;
const CONFIG: ConfigFile = { plans: { free: { quota: 50, window_seconds: LONG_WINDOW } }, default_plan: 'free' };
const HOUR = 3_600_000;

describe('LMDB records written without shared structures', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-inline-records-'));
  let server: TestServer | undefined;
  let alice: Record<string, string>;
  const earlier = Date.now() - HOUR;

  before(async () => {
    const config = loadConfig({ COLLOQUY_DATA_DIR: dataDir }, CONFIG);
    const storage = new InlineRecordStorage(dataDir);
    const services = createIdentityServices(config, storage);
    assert.equal(await services.users.create('alice', 'free'), true);
    const { key, key_id: keyId } = await createKey(services.apiKeys, 'alice', 'laptop');
    alice = { authorization: `Bearer ${key}` };
    for (let taken = 0; taken < 3; taken++) {
      const reservation = await services.quota.reserve({ kind: 'user', id: 'alice', plan: 'free', keyId }, 'chat');
      await reservation.durable;
    }
    await services.sessions.append('alice', 'before', [
      { role: 'user', content: 'asked before the upgrade', timestamp: new Date(earlier).toISOString() },
      { role: 'assistant', content: 'answered before the upgrade', timestamp: new Date(earlier).toISOString() },
    ]);
    await services.usageStore.record({
      time: earlier,
      subject: 'alice',
      key_id: null,
      model: 'builtin-extractive',
      route: '/api/chat/',
      input_tokens: 11,
      output_tokens: 22,
      status: 200,
    });
    await storage.close();
    server = await bootServer({ dataDir, config: CONFIG });
  });
  /** The server booted on the directory (until the last test closes it to read the files itself). */
  const running = (): TestServer => {
    assert.ok(server);
    return server;
  };
  after(async () => {
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the key, the user, the quota used, the session and the usage written before are all read', async () => {
    const quota = await running().fetch('/api/chat/quota/me', { headers: alice });
    assert.equal(quota.status, 200);
    const standing = (await quota.json()) as { plan: string; remaining: number };
    assert.equal(standing.plan, 'free');
    assert.equal(standing.remaining, 47);

    const session = await running().fetch('/api/chat/session/before', { headers: alice });
    assert.equal(session.status, 200);
    const body = (await session.json()) as { message_count: number; messages: Array<{ content: string }> };
    assert.equal(body.message_count, 2);
    assert.deepEqual(
      body.messages.map((message) => message.content),
      ['asked before the upgrade', 'answered before the upgrade'],
    );

    const usage = await running().fetch(`/api/usage?from=${new Date(earlier - HOUR).toISOString()}`, { headers: alice });
    assert.equal(usage.status, 200);
    const { total } = (await usage.json()) as { total: Record<string, number> };
    assert.deepEqual(total, { requests: 1, input_tokens: 11, output_tokens: 22, errors: 0 });
  });

  test('a chat continues the old session and counts down from the old quota, both written the new way', async () => {
    const chatted = await running().post('/api/chat/', { message: 'asked after the upgrade', session_id: 'before' }, alice);
    assert.equal(chatted.status, 200);
    const reply = (await chatted.json()) as { plan: string; remaining: number };
    assert.equal(reply.plan, 'free');
    assert.equal(reply.remaining, 46);

    const session = (await (await running().fetch('/api/chat/session/before', { headers: alice })).json()) as {
      messages: Array<{ role: string; content: string }>;
    };
    assert.deepEqual(
      session.messages.map((message) => message.role),
      ['user', 'assistant', 'user', 'assistant'],
    );
    assert.equal(session.messages[2]?.content, 'asked after the upgrade');
  });

  test('whole-database reads (the listings and an export) see records only, never the structures entry', async () => {
    await running().post('/api/chat/', { message: 'a second session', session_id: 'after' }, alice);
    const listed = (await (await running().fetch('/api/chat/sessions', { headers: alice })).json()) as {
      sessions: Array<{ session_id: string }>;
    };
    assert.deepEqual(listed.sessions.map((session) => session.session_id).sort(), ['after', 'before']);
    await running().close();
    server = undefined;

    const config = loadConfig({ COLLOQUY_DATA_DIR: dataDir }, CONFIG);
    const storage = new LmdbStorage(dataDir);
    try {
      const stores = storesOn(storage, config);
      const exported = { users: [] as unknown[], keys: [] as unknown[], counters: [] as unknown[], sessions: [] as string[], usage: 0 };
      for await (const user of stores.users.exportRecords()) exported.users.push(user);
      for await (const key of stores.apiKeys.exportRecords()) exported.keys.push(key);
      for await (const counter of stores.counters.exportRecords()) exported.counters.push(counter);
      for await (const session of stores.sessions.exportRecords()) exported.sessions.push(`${session.owner}/${session.session_id}`);
      for await (const _ of stores.usage.exportRecords()) exported.usage += 1;
      assert.equal(exported.users.length, 1);
      assert.equal(exported.keys.length, 1);
      assert.equal(exported.counters.length, 1);
      assert.deepEqual(exported.sessions.sort(), ['alice/after', 'alice/before']);
      assert.equal(exported.usage, 3);
      // The turns written since do use the shared structures: their database holds the entry.
      const turns = storage.root.openDB<unknown, string>({ name: 'session-messages' });
      assert.ok(turns.getBinary(Symbol.for('structures') as unknown as string));
    } finally {
      await storage.close();
    }
  });
});
