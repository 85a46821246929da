import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ConfigFile } from '../src/config/index.js';
import { createKnowledgeBase } from '../src/rag/create.js';
import { loadConfig } from '../src/config/index.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { storesOn } from '../src/store/open.js';
import { RedisStorage } from '../src/store/redis.js';
import { makePdf } from './helpers/documents.js';
import { closedPort } from './helpers/ports.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import { bootServer, type TestServer } from './helpers/server.js';

/** `colloquy storage copy`: a whole deployment moved LMDB → Redis → LMDB, record for record. */

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));
const ADMIN_TOKEN = 'admin-storage-copy';
const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** Windows long enough that the test never crosses an edge. */
const LONG_WINDOW = 10 * 365 * 86_400;
const CONFIG: ConfigFile = {
  models: [{ id: 'house', provider: 'builtin' }],
  default_model: 'builtin-extractive',
  plans: {
    free: { quota: 100, window_seconds: LONG_WINDOW },
    metered: { quota: 500, window_seconds: LONG_WINDOW, tokens: { quota: 1_000_000, window_seconds: LONG_WINDOW } },
  },
};
const QUERIES = ['When are refunds issued?', 'How is the pump primed?', 'lighthouse keeper'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The real CLI with nothing but PATH (and COLLOQUY_DATA_DIR when given) in its environment. */
function cli(args: string[], dataDir?: string): Promise<Run> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
  if (dataDir) env.COLLOQUY_DATA_DIR = dataDir;
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Where a document's chunks sit in the index: placement, numbered afresh by each engine's writes. */
const PLACEMENT = new Set(['first_chunk', 'terms_key']);

/** A plain, comparable copy of a value (binary hashes as hex, undefined fields and index placement dropped). */
function plain(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, function (this: Record<string, unknown>, key, field) {
      const raw = this[key];
      if (raw instanceof Uint8Array) return Buffer.from(raw).toString('hex');
      return PLACEMENT.has(key) ? undefined : field;
    }),
  );
}

function sorted(values: unknown[]): unknown[] {
  return values.map(plain).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
}

async function all<T>(records: AsyncIterable<T>): Promise<T[]> {
  const collected: T[] = [];
  for await (const record of records) collected.push(record);
  return collected;
}

/** Every record of every kind on one engine. */
async function dump(storage: LmdbStorage | RedisStorage): Promise<Record<string, unknown[]>> {
  const stores = storesOn(storage, {
    sessionMaxTurns: 200,
    sessionCacheChars: 1024 * 1024,
    resumable: { maxBytes: 1024 * 1024, ttlSeconds: 600 },
  });
  const knowledge = createKnowledgeBase(loadConfig({}), storage, { threads: 0 });
  try {
    return {
      users: sorted(await all(stores.users.exportRecords())),
      keys: sorted(await all(stores.apiKeys.exportRecords())),
      counters: sorted(await all(stores.counters.exportRecords())),
      sessions: sorted(await all(stores.sessions.exportRecords())),
      usage: sorted(await all(stores.usage.exportRecords())),
      documents: sorted(await all(knowledge.exportDocuments())),
    };
  } finally {
    await knowledge.close();
    await storage.close();
  }
}

function openRedis(redis: RedisServer, prefix: string): Promise<RedisStorage> {
  return RedisStorage.open({ url: redis.url, keyPrefix: prefix, connectTimeoutMs: 2000 });
}

/** What a server on a copy must answer as the original did. */
interface Observed {
  quota: Record<string, unknown>;
  passages: unknown[];
}

async function observe(server: TestServer): Promise<Observed> {
  const quota: Record<string, unknown> = {};
  for (const user of ['alice', 'bob']) {
    const response = await server.fetch(`/api/chat/quota/${user}`, { headers: ADMIN });
    assert.equal(response.status, 200);
    const { reset: _reset, ...status } = (await response.json()) as Record<string, unknown>;
    quota[user] = status;
  }
  const passages: unknown[] = [];
  for (const query of QUERIES) passages.push(plain(await server.services.knowledge.retrieve(query, { topK: 4 })));
  return { quota, passages };
}

describe('storage copy', () => {
  let redis: RedisServer;
  let scratch: string;
  let source: string;
  let back: string;
  let keys: { alice: string; revoked: string; bob: string };
  let original: Observed;

  before(async () => {
    redis = await startRedisServer();
    scratch = mkdtempSync(join(tmpdir(), 'colloquy-copy-'));
    source = join(scratch, 'source');
    back = join(scratch, 'back');
    const files = join(scratch, 'files');
    mkdirSync(files);
    writeFileSync(join(files, 'refunds.txt'), 'Refunds are issued within 14 days of the returned parcel arriving at the warehouse.');
    writeFileSync(join(files, 'lighthouse.md'), '# The lighthouse\n\nThe lighthouse keeper climbs 120 steps every evening.');
    writeFileSync(
      join(files, 'pump.pdf'),
      makePdf(['The pump manual.', 'The pump is primed by opening the bleed valve.', 'Winter storage.'], { title: 'Pump' }),
    );
    const general = await cli(['rag', 'add', join(files, 'refunds.txt'), join(files, 'lighthouse.md')], source);
    assert.equal(general.code, 0, general.stderr);
    const manuals = await cli(['rag', 'add', join(files, 'pump.pdf'), '--collection', 'manuals'], source);
    assert.equal(manuals.code, 0, manuals.stderr);

    const server = await bootServer({ dataDir: source, env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN }, config: CONFIG });
    try {
      assert.equal((await server.post('/api/admin/users', { user_id: 'alice', plan: 'metered' }, ADMIN)).status, 201);
      assert.equal((await server.post('/api/admin/users', { user_id: 'bob' }, ADMIN)).status, 201);
      const keyFor = async (user: string) =>
        ((await (await server.post(`/api/admin/users/${user}/keys`, '', ADMIN)).json()) as { key: string }).key;
      keys = { alice: await keyFor('alice'), revoked: await keyFor('alice'), bob: await keyFor('bob') };
      const chat = async (key: string, message: string, sessionId: string) => {
        const response = await server.post('/api/chat/', { message, session_id: sessionId }, { authorization: `Bearer ${key}` });
        assert.equal(response.status, 200, await response.clone().text());
        await response.text();
      };
      await chat(keys.alice, 'When are refunds issued?', 'alice-one');
      await chat(keys.alice, 'And who keeps the lighthouse?', 'alice-one');
      await chat(keys.alice, 'A second conversation', 'alice-two');
      await chat(keys.revoked, 'Used once before revocation', 'alice-two');
      await chat(keys.bob, 'How is the pump primed?', 'bob-one');
      await chat(keys.bob, 'Thanks', 'bob-one');
      const revokedId = keys.revoked.split('_')[1];
      assert.equal((await server.fetch(`/api/admin/users/alice/keys/${revokedId}`, { method: 'DELETE', headers: ADMIN })).status, 200);
      original = await observe(server);
      assert.ok(
        original.passages.every((passages) => (passages as unknown[]).length > 0),
        'every query finds passages',
      );
    } finally {
      await server.close();
    }
  });

  after(async () => {
    await redis?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a round trip LMDB → Redis → LMDB keeps every record, and servers on the copies answer as the original did', async () => {
    const out = await cli(['storage', 'copy', '--from', source, '--to', redis.url, '--to-prefix', 'copy:']);
    assert.equal(out.code, 0, out.stderr);
    assert.match(
      out.stdout,
      /^copied 2 users, 3 API keys, 2 quota counters, 3 sessions, 6 usage records, 3 documents from .+ to redis:\/\//,
    );
    assert.match(out.stderr, /copied 3 documents/);
    const home = await cli(['storage', 'copy', '--from', redis.url, '--from-prefix', 'copy:', '--to', back, '--json']);
    assert.equal(home.code, 0, home.stderr);
    assert.deepEqual((JSON.parse(home.stdout) as { copied: unknown }).copied, {
      users: 2,
      'API keys': 3,
      'quota counters': 2,
      sessions: 3,
      'usage records': 6,
      documents: 3,
    });

    const expected = await dump(new LmdbStorage(source));
    const revoked = (expected.keys as Array<{ revoked_at?: string; last_used?: string }>).filter((key) => key.revoked_at);
    assert.equal(revoked.length, 1);
    assert.ok(revoked[0]?.last_used, 'the revoked key was used before');
    const paged = expected.documents as Array<{ record: { collection: string }; chunks: Array<{ page?: number }> }>;
    assert.deepEqual([...new Set(paged.map((document) => document.record.collection))].sort(), ['default', 'manuals']);
    assert.ok(paged.some((document) => document.chunks.some((chunk) => chunk.page === 2)));
    const counters = expected.counters as Array<{ subject: string; used: number; tokens_used?: number }>;
    assert.ok(counters.some((counter) => counter.used === 4 && (counter.tokens_used ?? 0) > 0));
    const sessions = expected.sessions as Array<{ owner: string; messages: unknown[] }>;
    assert.deepEqual(sessions.map((session) => [session.owner, session.messages.length]).sort(), [
      ['alice', 4],
      ['alice', 4],
      ['bob', 4],
    ]);

    assert.deepEqual(await dump(await openRedis(redis, 'copy:')), expected);
    assert.deepEqual(await dump(new LmdbStorage(back)), expected);

    const onRedis = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN, COLLOQUY_REDIS_URL: redis.url, COLLOQUY_REDIS_PREFIX: 'copy:' },
      config: CONFIG,
    });
    const onLmdb = await bootServer({ dataDir: back, env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN }, config: CONFIG });
    try {
      for (const server of [onRedis, onLmdb]) {
        assert.deepEqual(await observe(server), original);
        const me = await server.fetch('/api/chat/quota/me', { headers: { authorization: `Bearer ${keys.alice}` } });
        assert.equal(me.status, 200);
        assert.equal(((await me.json()) as { user_id: string }).user_id, 'alice');
        const refused = await server.fetch('/api/chat/quota/me', { headers: { authorization: `Bearer ${keys.revoked}` } });
        assert.equal(refused.status, 401);
        await refused.text();
        const session = await server.fetch('/api/chat/session/bob-one', { headers: { authorization: `Bearer ${keys.bob}` } });
        assert.equal(((await session.json()) as { message_count: number }).message_count, 4);
      }
    } finally {
      await onRedis.close();
      await onLmdb.close();
    }
  });

  test('a non-empty target is refused without --force, and merged with it', async () => {
    const refused = await cli(['storage', 'copy', '--from', source, '--to', redis.url, '--to-prefix', 'copy:']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /the target redis:\/\/127\.0\.0\.1:\d+\/? \(prefix "copy:"\) is not empty \(it holds users\).*--force/);
    const forced = await cli(['storage', 'copy', '--from', source, '--to', back, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
  });

  test('an unreachable Redis and a missing source directory are clear errors with a non-zero exit', async () => {
    const dead = `redis://127.0.0.1:${await closedPort()}`;
    const unreachable = await cli(['storage', 'copy', '--from', source, '--to', dead]);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /^colloquy: cannot reach the target Redis at redis:\/\/127\.0\.0\.1:\d+\/?: .*ECONNREFUSED/);
    const missing = await cli(['storage', 'copy', '--from', join(scratch, 'nowhere'), '--to', join(scratch, 'elsewhere')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /the source data directory .*nowhere does not exist/);
    const empty = await cli(['storage', 'copy', '--from', redis.url, '--from-prefix', 'nothing-here:', '--to', join(scratch, 'empty')]);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stderr, /note: the source redis:.* \(prefix "nothing-here:"\) holds no records/);
    const usage = await cli(['storage', 'copy', '--from', source]);
    assert.equal(usage.code, 2);
  });
});
