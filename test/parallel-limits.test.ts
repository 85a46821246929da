import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'admin-token-parallel-0123456789';

/** Opens a stream and resolves with its response once its headers arrived (its body still running). */
function openStream(server: TestServer, headers: Record<string, string> = {}): Promise<Response> {
  return server.post('/api/chat/stream', { message: 'a slow answer please' }, headers);
}

async function keyFor(server: TestServer, userId: string, plan: string): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN}` };
  assert.equal((await server.post('/api/admin/users', { user_id: userId, plan }, admin)).status, 201);
  return ((await (await server.post(`/api/admin/users/${userId}/keys`, {}, admin)).json()) as { key: string }).key;
}

describe('parallel work is limited per caller and per node', () => {
  test('an anonymous address past anonymous_max_parallel gets 429 concurrency_limit with Retry-After: 1, and pays nothing', async () => {
    const server = await bootServer({ config: { builtin_delay_ms: 30, anonymous_max_parallel: 2 } });
    try {
      const running = [await openStream(server), await openStream(server)];
      assert.deepEqual(
        running.map((response) => response.status),
        [200, 200],
      );
      const refused = await openStream(server);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'concurrency_limit');
      await Promise.all(running.map((response) => response.text()));
      const quota = (await (await server.fetch('/api/chat/quota/me')).json()) as { used: number };
      assert.equal(quota.used, 2, 'the refused request took no quota');
      // Slots come back when replies end.
      assert.equal((await server.post('/api/chat/', { message: 'again' })).status, 200);
    } finally {
      await server.close();
    }
  });

  test("a plan's max_parallel limits its users; a plan without one does not", async () => {
    const server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: {
        builtin_delay_ms: 30,
        plans: { free: { quota: 100, window_seconds: 86_400 }, single: { quota: 100, window_seconds: 86_400, max_parallel: 1 } },
      },
    });
    try {
      const single = { authorization: `Bearer ${await keyFor(server, 'solo', 'single')}` };
      const free = { authorization: `Bearer ${await keyFor(server, 'many', 'free')}` };
      const first = await openStream(server, single);
      assert.equal(first.status, 200);
      assert.equal((await openStream(server, single)).status, 429);
      const unlimited = await Promise.all(Array.from({ length: 5 }, () => openStream(server, free)));
      assert.ok(unlimited.every((response) => response.status === 200));
      await Promise.all([first, ...unlimited].map((response) => response.text()));
    } finally {
      await server.close();
    }
  });

  test('a node holding max_streams open streams answers new ones 503 overloaded; JSON replies still go through', async () => {
    const server = await bootServer({ config: { builtin_delay_ms: 30, max_streams: 1 } });
    try {
      const open = await openStream(server);
      assert.equal(open.status, 200);
      const refused = await server.post('/api/chat/progress', { message: 'another stream' }, { 'x-forwarded-for': '1' });
      assert.equal(refused.status, 503);
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'overloaded');
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal((await server.post('/api/chat/', { message: 'json is not a stream' })).status, 200);
      await open.text();
      assert.equal((await openStream(server)).status, 200);
    } finally {
      await server.close();
    }
  });
});
