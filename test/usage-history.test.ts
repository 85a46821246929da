import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { closedPort } from './helpers/ports.js';
import { bootServer, storageEnv, type TestServer } from './helpers/server.js';

/** The usage history: a record per counted request, totals by day, model or key, retention, and the CSV export. */

const ADMIN = { authorization: 'Bearer admin-usage' };
const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));
const DAY = 86_400_000;
let server: TestServer;
let now = Date.parse('2026-11-20T12:00:00Z');
let deadPort = 0;

before(async () => {
  deadPort = await closedPort();
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-usage' },
    clock: () => now,
    config: {
      models: [
        { id: 'house', provider: 'builtin' },
        { id: 'gone', provider: 'openai', base_url: `http://127.0.0.1:${deadPort}/v1` },
      ],
      default_model: 'builtin-extractive',
      usage_retention_days: 90,
      upstream: { retries: 0, connect_timeout_ms: 500 },
      plans: { free: { quota: 1000, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
});

async function keyFor(userId: string): Promise<string> {
  const created = await server.post(`/api/admin/users/${userId}/keys`, '', ADMIN);
  return ((await created.json()) as { key: string }).key;
}

async function usage(query: string, headers: Record<string, string>): Promise<any> {
  const response = await server.fetch(`/api/usage${query}`, { headers });
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

describe('usage history', () => {
  let ada: { key_a: string; key_b: string };
  const tokens = { input: 0, output: 0 };

  before(async () => {
    assert.equal((await server.post('/api/admin/users', { user_id: 'ada' }, ADMIN)).status, 201);
    assert.equal((await server.post('/api/admin/users', { user_id: 'bo' }, ADMIN)).status, 201);
    ada = { key_a: await keyFor('ada'), key_b: await keyFor('ada') };
    const asAda = (key: string) => ({ authorization: `Bearer ${key}` });
    // Day one: two chats on key a (two models), one stream on key b, one image, one failed upstream call.
    for (const body of [{ message: 'hello' }, { message: 'hello again', model: 'house' }]) {
      const reply = (await (await server.post('/api/chat', body, asAda(ada.key_a))).json()) as any;
      tokens.input += reply.usage.input_tokens;
      tokens.output += reply.usage.output_tokens;
    }
    await (await server.post('/api/chat/stream', { message: 'streamed' }, asAda(ada.key_b))).text();
    assert.equal((await server.post('/api/chat/image', { prompt: 'a cat', size: '256x256' }, asAda(ada.key_b))).status, 200);
    assert.equal((await server.post('/api/chat', { message: 'fails', model: 'gone' }, asAda(ada.key_a))).status, 502);
    // Not counted: refused before any quota was taken.
    assert.equal((await server.post('/api/chat', { message: '' }, asAda(ada.key_a))).status, 400);
    // Day two: one more chat, and bo's own.
    now += DAY;
    await (await server.post('/api/chat', { message: 'next day' }, asAda(ada.key_a))).json();
    await (await server.post('/api/chat', { message: 'bo here' }, { authorization: `Bearer ${await keyFor('bo')}` })).json();
  });

  test('a caller’s totals by day count every counted request, its tokens and its errors', async () => {
    const body = await usage('?from=2026-11-19&to=2026-11-21', { authorization: `Bearer ${ada.key_a}` });
    assert.equal(body.user_id, 'ada');
    assert.equal(body.group_by, 'day');
    assert.deepEqual(
      body.groups.map((group: any) => [group.key, group.requests, group.errors]),
      [
        ['2026-11-20', 5, 1],
        ['2026-11-21', 1, 0],
      ],
    );
    assert.equal(body.total.requests, 6);
    assert.ok(body.total.input_tokens >= tokens.input);
    assert.ok(body.total.output_tokens >= tokens.output);
  });

  test('grouped by model and by key', async () => {
    const headers = { authorization: `Bearer ${ada.key_a}` };
    const byModel = await usage('?from=2026-11-19&to=2026-11-22&group_by=model', headers);
    const models = Object.fromEntries(byModel.groups.map((group: any) => [group.key, group.requests]));
    assert.deepEqual(models, { 'builtin-extractive': 3, house: 1, gone: 1, 'builtin-abstract': 1 });
    const byKey = await usage('?from=2026-11-19&to=2026-11-22&group_by=key', headers);
    const keys = byKey.groups.map((group: any) => group.requests).sort();
    assert.deepEqual(keys, [2, 4]);
  });

  test('a user reads only their own usage; the admin reads anyone’s or everyone’s', async () => {
    const forbidden = await server.fetch('/api/usage?user_id=bo', { headers: { authorization: `Bearer ${ada.key_a}` } });
    assert.equal(forbidden.status, 403);
    const bo = await usage('?from=2026-11-19&to=2026-11-22&user_id=bo', ADMIN);
    assert.equal(bo.total.requests, 1);
    const everyone = await usage('?from=2026-11-19&to=2026-11-22', ADMIN);
    assert.equal(everyone.user_id, null);
    assert.equal(everyone.total.requests, 7);
  });

  test('a wrong query is a 400 naming the field', async () => {
    for (const [query, field] of [
      ['?group_by=week', 'group_by'],
      ['?from=yesterday', 'from'],
      ['?from=2026-11-21&to=2026-11-20', 'from'],
      ['?from=2024-01-01&to=2026-01-01', 'from'],
      ['?colour=red', 'colour'],
      ['?user_id=not%20an%20id', 'user_id'],
    ]) {
      const response = await server.fetch(`/api/usage${query}`, { headers: ADMIN });
      assert.equal(response.status, 400, query);
      assert.equal(((await response.json()) as any).error.details[0].path, field, query);
    }
  });

  test('colloquy usage export writes the records as CSV', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [CLI, 'usage', 'export', '--from', '2026-11-19', '--to', '2026-11-22', '--user', 'ada'],
      {
        env: { PATH: process.env.PATH ?? '', COLLOQUY_DATA_DIR: server.dataDir, ...(await storageEnv(server.dataDir)) },
      },
    );
    const lines = stdout.trim().split('\n');
    assert.equal(lines[0], 'time,user_id,key_id,model,route,input_tokens,output_tokens,status');
    assert.equal(lines.length, 7);
    const failed = lines.find((line) => line.endsWith(',502'));
    assert.match(failed ?? '', /^2026-11-20T12:00:00\.000Z,ada,[0-9a-f]{16},gone,\/api\/chat,\d+,0,502$/);
    assert.ok(lines.some((line) => line.includes(',/api/chat/image,')));
  });

  test('records older than usage_retention_days are swept away', async () => {
    now += 91 * DAY;
    const removed = await server.services.usage.sweep();
    assert.equal(removed, 7);
    const body = await usage('?from=2026-11-19&to=2026-11-22', ADMIN);
    assert.equal(body.total.requests, 0);
  });
});
