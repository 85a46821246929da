import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Caller } from '../src/domain/types.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'quota-admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

async function userWithKey(server: TestServer, userId: string, plan: string): Promise<Record<string, string>> {
  assert.equal((await server.post('/api/admin/users', { user_id: userId, plan }, admin)).status, 201);
  const response = await server.post(`/api/admin/users/${userId}/keys`, '', admin);
  const { key } = (await response.json()) as { key: string };
  return { authorization: `Bearer ${key}` };
}

function chat(server: TestServer, headers: Record<string, string>, extra: Record<string, unknown> = {}): Promise<Response> {
  return server.post('/api/chat/', { message: 'hello there', ...extra }, headers);
}

async function quotaOf(
  server: TestServer,
  userId: string,
): Promise<{ used: number; remaining: number; limit: number; reset: string; plan: string }> {
  const response = await server.fetch(`/api/chat/quota/${userId}`, { headers: admin });
  assert.equal(response.status, 200);
  return (await response.json()) as { used: number; remaining: number; limit: number; reset: string; plan: string };
}

describe('quota: exact under concurrency, fixed windows, costs', () => {
  let server: TestServer;
  let searxng: Server;
  // 2026-11-22T10:00:30Z: 30 s into a one-minute window.
  let now = Date.UTC(2026, 10, 22, 10, 0, 30);

  before(async () => {
    // A loopback SearXNG answering its JSON API, so /api/chat/search has real results to cite.
    searxng = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          query: 'lmdb',
          results: [{ title: 'LMDB', url: 'https://example.org/lmdb', content: 'LMDB is an embedded key-value store.' }],
        }),
      );
    });
    await new Promise<void>((resolve) => searxng.listen(0, '127.0.0.1', resolve));
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: {
        search: { provider: 'searxng', base_url: `http://127.0.0.1:${(searxng.address() as AddressInfo).port}` },
        plans: {
          free: { quota: 100, window_seconds: 3600 },
          tiny: { quota: 3, window_seconds: 60 },
          mid: { quota: 20, window_seconds: 3600 },
        },
        costs: { chat: 1, search: 2, image: 7 },
      },
      clock: () => now,
    });
  });
  after(async () => {
    await server.close();
    await new Promise<void>((resolve) => searxng.close(() => resolve()));
  });

  test('a 160-request concurrent burst gets exactly the remaining count through, each with a distinct remaining value', async () => {
    const headers = await userWithKey(server, 'burst', 'free');
    const caller: Caller = { kind: 'user', id: 'burst', plan: 'free', keyId: 'x' };
    for (let index = 0; index < 20; index += 1) await server.services.quota.reserve(caller, 'chat');

    const responses = await Promise.all(Array.from({ length: 160 }, () => chat(server, headers)));
    const ok = responses.filter((response) => response.status === 200);
    const refused = responses.filter((response) => response.status === 429);
    assert.equal(ok.length, 80);
    assert.equal(refused.length, 80);

    const remaining = await Promise.all(ok.map(async (response) => ((await response.json()) as { remaining: number }).remaining));
    assert.deepEqual(
      [...remaining].sort((a, b) => a - b),
      Array.from({ length: 80 }, (_, index) => index),
    );
    for (const [index, response] of ok.entries()) {
      assert.equal(response.headers.get('ratelimit-limit'), '100');
      assert.equal(response.headers.get('ratelimit-remaining'), String(remaining[index]));
      assert.ok(Number(response.headers.get('ratelimit-reset')) > 0);
    }
    for (const response of refused) {
      const body = (await response.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'quota_exceeded');
      assert.equal(response.headers.get('ratelimit-remaining'), '0');
      assert.equal(response.headers.get('ratelimit-limit'), '100');
      assert.equal(response.headers.get('retry-after'), response.headers.get('ratelimit-reset'));
    }
    assert.equal((await quotaOf(server, 'burst')).used, 100);
    const metrics = await (await server.fetch('/metrics')).text();
    assert.match(metrics, /colloquy_quota_refusals_total\{plan="free"\} 80\b/);
  });

  test('the window resets at its fixed end, and a refusal says when (injected clock)', async () => {
    const headers = await userWithKey(server, 'windowed', 'tiny');
    for (let index = 0; index < 3; index += 1) assert.equal((await chat(server, headers)).status, 200);
    const refused = await chat(server, headers);
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '30');
    assert.equal(refused.headers.get('ratelimit-reset'), '30');
    const status = await quotaOf(server, 'windowed');
    assert.deepEqual([status.used, status.remaining, status.reset], [3, 0, '2026-11-22T10:01:00.000Z']);

    now += 30_000; // exactly the window end: a new window begins
    const fresh = await chat(server, headers);
    assert.equal(fresh.status, 200);
    const body = (await fresh.json()) as { remaining: number; reset: string; plan: string };
    assert.deepEqual([body.plan, body.remaining, body.reset], ['tiny', 2, '2026-11-22T10:02:00.000Z']);
    assert.equal(fresh.headers.get('ratelimit-reset'), '60');
  });

  test('each operation costs what the config says: chat 1, search 2, image 7; an unaffordable image is refused while chat still passes', async () => {
    const headers = await userWithKey(server, 'coster', 'mid');
    const image = await server.post('/api/chat/image', { prompt: 'a lighthouse', size: '256x256' }, headers);
    assert.equal(image.status, 200);
    assert.equal(((await image.json()) as { remaining: number }).remaining, 13);
    const search = await server.post('/api/chat/search', { message: 'what is lmdb' }, headers);
    assert.equal(search.status, 200);
    assert.equal(((await search.json()) as { remaining: number }).remaining, 11);
    const chatted = await chat(server, headers);
    assert.equal(((await chatted.json()) as { remaining: number }).remaining, 10);
    assert.equal((await server.post('/api/chat/image', { prompt: 'again', size: '256x256' }, headers)).status, 200);
    const refusedImage = await server.post('/api/chat/image', { prompt: 'once more', size: '256x256' }, headers);
    assert.equal(refusedImage.status, 429);
    assert.equal(refusedImage.headers.get('ratelimit-remaining'), '3');
    assert.ok(refusedImage.headers.get('retry-after'));
    assert.equal((await chat(server, headers)).status, 200);
    assert.equal((await quotaOf(server, 'coster')).used, 18);
  });

  test('the quota record is readable as "me" or by own id, by the admin for anyone, and is 403 for anyone else', async () => {
    const own = await userWithKey(server, 'reader', 'mid');
    await userWithKey(server, 'other', 'mid');
    const me = (await (await server.fetch('/api/chat/quota/me', { headers: own })).json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(me).sort(), ['limit', 'plan', 'remaining', 'reset', 'used', 'user_id', 'window_seconds']);
    assert.deepEqual([me.user_id, me.plan, me.limit, me.used, me.remaining, me.window_seconds], ['reader', 'mid', 20, 0, 20, 3600]);
    assert.equal((await server.fetch('/api/chat/quota/reader', { headers: own })).status, 200);
    const forbidden = await server.fetch('/api/chat/quota/other', { headers: own });
    assert.equal(forbidden.status, 403);
    assert.equal(((await forbidden.json()) as { error: { code: string } }).error.code, 'forbidden');
    assert.equal((await server.fetch('/api/chat/quota/nobody', { headers: own })).status, 403);
    assert.equal((await server.fetch('/api/chat/quota/reader')).status, 403, 'anonymous cannot read a user');
    assert.equal((await server.fetch('/api/chat/quota/other', { headers: admin })).status, 200);
    assert.equal((await server.fetch('/api/chat/quota/nobody', { headers: admin })).status, 404);
  });
});

describe('quota: anonymous callers by address', () => {
  test('anonymous callers are counted per client address on the anonymous plan', async () => {
    const server = await bootServer({
      config: {
        trust_proxy: true,
        anonymous_plan: 'anon',
        plans: { anon: { quota: 2, window_seconds: 86_400 }, free: { quota: 50, window_seconds: 86_400 } },
      },
    });
    try {
      const from = (address: string) => ({ 'x-forwarded-for': address });
      assert.equal((await chat(server, from('203.0.113.7'))).status, 200);
      assert.equal((await chat(server, from('203.0.113.7'))).status, 200);
      const refused = await chat(server, from('203.0.113.7'));
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('ratelimit-limit'), '2');
      const other = await chat(server, from('198.51.100.9'));
      assert.equal(other.status, 200);
      assert.equal(((await other.json()) as { plan: string; remaining: number }).remaining, 1);
      const status = (await (await server.fetch('/api/chat/quota/me', { headers: from('203.0.113.7') })).json()) as Record<string, unknown>;
      assert.deepEqual([status.user_id, status.plan, status.used, status.remaining], ['anon:203.0.113.7', 'anon', 2, 0]);
    } finally {
      await server.close();
    }
  });
});

describe('quota: failed upstream calls', () => {
  let upstream: Server;
  let upstreamCalls = 0;
  let server: TestServer;

  before(async () => {
    // A real OpenAI-compatible loopback upstream: `fail` answers 500; `partial` streams one delta, then resets.
    upstream = createServer((request, response) => {
      upstreamCalls += 1;
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const model = (JSON.parse(body) as { model: string }).model;
        if (model === 'fail') {
          response.writeHead(500, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ error: { message: 'boom', type: 'server_error' } }));
          return;
        }
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(
          `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: 'Half an ans' } }] })}\n\n`,
        );
        setTimeout(() => response.socket?.destroy(), 20);
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: {
        plans: { free: { quota: 10, window_seconds: 3600 } },
        upstream: { retries: 0 },
        models: [
          { id: 'fail', provider: 'openai', base_url: base },
          { id: 'partial', provider: 'openai', base_url: base },
        ],
      },
    });
  });
  after(async () => {
    await server.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  test('an upstream that fails before producing anything gives the quota back', async () => {
    const headers = await userWithKey(server, 'refunded', 'free');
    const response = await chat(server, headers, { model: 'fail' });
    assert.equal(response.status, 502);
    assert.ok(upstreamCalls > 0, 'the upstream was called');
    assert.equal((await quotaOf(server, 'refunded')).used, 0);
  });

  test('an upstream that fails after producing output keeps the request counted', async () => {
    const headers = await userWithKey(server, 'charged', 'free');
    const response = await server.post('/api/chat/stream', { message: 'hello', model: 'partial' }, headers);
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.match(text, /event: delta/);
    assert.match(text, /event: error/);
    assert.equal((await quotaOf(server, 'charged')).used, 1);
  });

  test('a request refused for quota never reaches the upstream', async () => {
    const headers = await userWithKey(server, 'spent', 'free');
    const caller: Caller = { kind: 'user', id: 'spent', plan: 'free', keyId: 'x' };
    for (let index = 0; index < 10; index += 1) await server.services.quota.reserve(caller, 'chat');
    const callsBefore = upstreamCalls;
    const refused = await chat(server, headers, { model: 'fail' });
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('ratelimit-remaining'), '0');
    const streamed = await server.post('/api/chat/stream', { message: 'hello', model: 'partial' }, headers);
    assert.equal(streamed.status, 429, 'a stream is refused with a JSON 429 before any byte of SSE');
    assert.match(streamed.headers.get('content-type') ?? '', /application\/json/);
    assert.equal(upstreamCalls, callsBefore);
  });
});
