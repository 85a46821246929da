import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { closedPort } from './helpers/ports.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, parseSse, type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';

/**
 * Model fallbacks: a model whose upstream fails before any part of the answer came hands the same
 * request to its fallbacks in order, on every route, for one quota unit; a failure after the
 * answer started is an in-band error, never a switch; a model failing in a row cools down.
 */

const GREETING = 'Bonjour ! Le café coûte 3 € — 日本語 もOK 🎉.';
const ADMIN = { authorization: 'Bearer admin-fallbacks' };
let upstream: ReplayUpstream;
let server: TestServer;
let deadPort = 0;
let now = Date.parse('2026-11-23T10:00:00Z');

/** How each upstream path prefix behaves. */
async function behave(prefix: string, response: http.ServerResponse): Promise<void> {
  const frames = fixture('openai-stream.sse').split('\n\n');
  switch (prefix) {
    case 'good':
      response.writeHead(200, { 'content-type': 'text/event-stream' }).end(frames.join('\n\n'));
      return;
    case 'rate-limited':
      response.writeHead(429, { 'content-type': 'application/json' }).end('{"error":{"message":"slow down","type":"rate_limit"}}');
      return;
    case 'failing':
      response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
      return;
    case 'refusing':
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key"}}');
      return;
    case 'stalling':
      // Headers, then nothing: the first-byte timeout fires before any answer event.
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.flushHeaders();
      return;
    case 'mid-answer':
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(`${frames.slice(0, 3).join('\n\n')}\n\ndata: {"error":{"message":"crashed"}}\n\n`);
      return;
    default:
      response.writeHead(404).end();
  }
}

function model(id: string, prefix: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    provider: 'openai' as const,
    base_url: `${upstream.url}/${prefix}/v1`,
    fallbacks: ['backup'],
    cooldown_after: 100,
    ...extra,
  };
}

function requestsTo(prefix: string): number {
  return upstream.requests.filter((request) => request.url.startsWith(`/${prefix}/`)).length;
}

before(async () => {
  upstream = await startUpstream(async (request, response) => {
    await behave((request.url ?? '').split('/')[1] ?? '', response);
  });
  deadPort = await closedPort();
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-fallbacks' },
    clock: () => now,
    config: {
      models: [
        { id: 'backup', provider: 'openai', base_url: `${upstream.url}/good/v1` },
        model('rate-limited', 'rate-limited'),
        model('failing', 'failing'),
        model('refusing', 'refusing'),
        model('stalling', 'stalling'),
        model('mid-answer', 'mid-answer'),
        { id: 'unreachable', provider: 'openai', base_url: `http://127.0.0.1:${deadPort}/v1`, fallbacks: ['backup'] },
        model('flaky', 'failing', { cooldown_after: 3, cooldown_s: 30 }),
      ],
      default_model: 'backup',
      upstream: { retries: 0, connect_timeout_ms: 1000, first_byte_timeout_ms: 300, idle_timeout_ms: 2000 },
      plans: { free: { quota: 1000, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

async function quotaUsed(): Promise<number> {
  const body = (await (await server.fetch('/api/chat/quota/fallback-user', { headers: ADMIN })).json()) as any;
  return body.used;
}

describe('model fallbacks', () => {
  let key = '';
  before(async () => {
    assert.equal((await server.post('/api/admin/users', { user_id: 'fallback-user' }, ADMIN)).status, 201);
    key = ((await (await server.post('/api/admin/users/fallback-user/keys', '', ADMIN)).json()) as any).key;
  });
  const auth = () => ({ authorization: `Bearer ${key}` });

  for (const [failing, code] of [
    ['rate-limited', 'upstream_error'],
    ['failing', 'upstream_error'],
    ['stalling', 'upstream_timeout'],
    ['unreachable', 'upstream_error'],
  ] as const) {
    test(`${failing}: the fallback answers, the reply names it and the attempt, one quota unit is taken`, async () => {
      const used = await quotaUsed();
      const backupCalls = requestsTo('good');
      const body = (await (await server.post('/api/chat', { message: 'hello', model: failing }, auth())).json()) as any;
      assert.equal(body.response, GREETING);
      assert.equal(body.model, 'backup');
      assert.deepEqual(body.attempts, [{ model: failing, error_code: code }]);
      assert.equal(await quotaUsed(), used + 1);
      assert.equal(requestsTo('good'), backupCalls + 1);
    });
  }

  test('the SSE start names the requested model; done names the one that answered and the attempts', async () => {
    const events = parseSse(await (await server.post('/api/chat/stream', { message: 'hello', model: 'failing' }, auth())).text());
    assert.equal(events[0]?.event, 'start');
    assert.equal(events[0]?.data.model, 'failing');
    const done = events.find((event) => event.event === 'done');
    assert.equal(done?.data.model, 'backup');
    assert.deepEqual(done?.data.attempts, [{ model: 'failing', error_code: 'upstream_error' }]);
    assert.equal(
      events
        .filter((event) => event.event === 'delta')
        .map((event) => event.data.text)
        .join(''),
      GREETING,
    );
  });

  test('the NDJSON result and the /v1 reply carry the answering model and the attempts too', async () => {
    const lines = (await (await server.post('/api/chat/progress', { message: 'hello', model: 'rate-limited' }, auth())).text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const result = lines.at(-1);
    assert.equal(result.type, 'result');
    assert.equal(result.model, 'backup');
    assert.deepEqual(result.attempts, [{ model: 'rate-limited', error_code: 'upstream_error' }]);

    const completion = (await (
      await server.post('/v1/chat/completions', { model: 'failing', messages: [{ role: 'user', content: 'hello' }] }, auth())
    ).json()) as any;
    assert.equal(completion.model, 'backup');
    assert.equal(completion.choices[0].message.content, GREETING);
    assert.deepEqual(completion.attempts, [{ model: 'failing', error_code: 'upstream_error' }]);
  });

  test('a failure after the answer started is an error event, never a switch to the fallback', async () => {
    const backupCalls = requestsTo('good');
    const events = parseSse(await (await server.post('/api/chat/stream', { message: 'hello', model: 'mid-answer' }, auth())).text());
    assert.ok(events.some((event) => event.event === 'delta'));
    assert.equal(events.at(-1)?.event, 'error');
    assert.equal(events.at(-1)?.data.error.code, 'upstream_error');
    assert.equal(requestsTo('good'), backupCalls, 'the fallback was never asked');
  });

  test('an upstream that refuses the request itself (401) is the caller’s error, with no fallback', async () => {
    const backupCalls = requestsTo('good');
    const response = await server.post('/api/chat', { message: 'hello', model: 'refusing' }, auth());
    assert.equal(response.status, 502);
    assert.equal(requestsTo('good'), backupCalls);
  });

  test('a model that failed cooldown_after times in a row is skipped for cooldown_s, shown in /health, then tried again', async () => {
    for (let round = 0; round < 3; round += 1) {
      const body = (await (await server.post('/api/chat', { message: 'hello', model: 'flaky' }, auth())).json()) as any;
      assert.deepEqual(body.attempts, [{ model: 'flaky', error_code: 'upstream_error' }]);
    }
    const before = requestsTo('failing');
    const skipped = (await (await server.post('/api/chat', { message: 'hello', model: 'flaky' }, auth())).json()) as any;
    assert.equal(skipped.model, 'backup');
    assert.deepEqual(skipped.attempts, [{ model: 'flaky', error_code: 'cooling_down' }]);
    assert.equal(requestsTo('failing'), before, 'the cooling model’s upstream was not called');
    const health = (await (await server.fetch('/health')).json()) as any;
    assert.equal(health.status, 'degraded');
    assert.equal(health.checks.providers.flaky.status, 'cooling_down');
    assert.equal(health.checks.providers.flaky.until, new Date(now + 30_000).toISOString());
    const metrics = await (await server.fetch('/metrics')).text();
    assert.match(metrics, /colloquy_model_attempts_total\{model="flaky",outcome="skipped"\} 1/);
    assert.match(metrics, /colloquy_fallbacks_total\{model="backup"\} \d+/);

    now += 31_000;
    const retried = (await (await server.post('/api/chat', { message: 'hello', model: 'flaky' }, auth())).json()) as any;
    assert.deepEqual(retried.attempts, [{ model: 'flaky', error_code: 'upstream_error' }]);
    assert.equal(requestsTo('failing'), before + 1, 'after the cool-down the model is tried again');
  });

  test('fallbacks must name configured models', async () => {
    await assert.rejects(
      bootServer({ config: { models: [{ id: 'a', provider: 'openai', base_url: 'http://127.0.0.1:9/v1', fallbacks: ['nope'] }] } }),
      /falls back to "nope", which is not one of the configured models/,
    );
    await assert.rejects(
      bootServer({ config: { models: [{ id: 'a', provider: 'openai', base_url: 'http://127.0.0.1:9/v1', fallbacks: ['a'] }] } }),
      /"a" names itself in fallbacks/,
    );
  });
});
