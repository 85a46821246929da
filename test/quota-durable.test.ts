import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { QuotaCounterStore } from '../src/store/types.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, startUpstream, type ReplayUpstream } from './helpers/upstream-replay.js';

/** How long the test holds every quota commit back. */
const COMMIT_DELAY_MS = 400;

let upstream: ReplayUpstream;
let server: TestServer;
/** performance.now() when the upstream received each request, and when each commit became durable. */
const upstreamSeenAt: number[] = [];
const durableAt: number[] = [];

/** Holds each take's durable promise back by COMMIT_DELAY_MS, noting when it resolves. */
function slowCommits(counters: QuotaCounterStore): QuotaCounterStore {
  return {
    used: (subject, windowStart) => counters.used(subject, windowStart),
    giveBack: (subject, windowStart, cost) => counters.giveBack(subject, windowStart, cost),
    adjustTokens: (subject, windowStart, delta) => counters.adjustTokens(subject, windowStart, delta),
    tokensUsed: (subject, windowStart) => counters.tokensUsed(subject, windowStart),
    async take(subject, windowStart, limit, cost, tokens) {
      const taken = await counters.take(subject, windowStart, limit, cost, tokens);
      const durable = taken.durable.then(
        () =>
          new Promise<void>((resolve) =>
            setTimeout(() => {
              durableAt.push(performance.now());
              resolve();
            }, COMMIT_DELAY_MS),
          ),
      );
      return { ...taken, durable };
    },
  };
}

before(async () => {
  upstream = await startUpstream(async (_request, response) => {
    upstreamSeenAt.push(performance.now());
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'Hello' } }] })}\n\n`);
    response.end(`data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
  });
  server = await bootServer({
    config: { models: [{ id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' }] },
    wrapQuotaCounters: slowCommits,
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

describe('the quota commit is hidden, never skipped', () => {
  for (const [route, accept] of [
    ['/api/chat/', 'application/json'],
    ['/api/chat/stream', 'text/event-stream'],
  ] as const) {
    test(`${route}: the upstream request starts during the commit, and no byte of the reply comes before it is durable`, async () => {
      upstreamSeenAt.length = 0;
      durableAt.length = 0;
      const sent = performance.now();
      const response = await server.post(route, { message: 'hi', model: 'gpt-test' }, { accept });
      const headersAt = performance.now();
      assert.equal(response.status, 200);
      const text = await response.text();
      assert.equal(durableAt.length, 1);
      assert.equal(upstreamSeenAt.length, 1);
      assert.ok(upstreamSeenAt[0]! < durableAt[0]!, 'the upstream was asked before the commit resolved');
      assert.ok(headersAt >= durableAt[0]!, 'the status line came after the commit resolved');
      assert.ok(headersAt - sent >= COMMIT_DELAY_MS);
      if (route === '/api/chat/stream') {
        assert.deepEqual(
          parseSse(text).map((event) => event.event),
          ['start', 'delta', 'done'],
        );
      } else {
        assert.equal((JSON.parse(text) as { response: string }).response, 'Hello');
      }
    });
  }
});

describe('a quota take that never becomes durable', () => {
  let failing: TestServer;
  before(async () => {
    failing = await bootServer({
      config: { models: [{ id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' }] },
      wrapQuotaCounters: (counters) => ({
        ...slowCommits(counters),
        async take(subject, windowStart, limit, cost, tokens) {
          const taken = await counters.take(subject, windowStart, limit, cost, tokens);
          // The decision was made, but the commit failed: the request must not be acknowledged.
          const durable = taken.durable.then(() => Promise.reject(new Error('disk full')));
          // Handled where it is made, as the stores do (they log it); the reply awaits it later.
          durable.catch(() => undefined);
          return { ...taken, durable };
        },
      }),
    });
  });
  after(async () => {
    await failing.close();
  });

  for (const [route, accept] of [
    ['/api/chat/', 'application/json'],
    ['/api/chat/stream', 'text/event-stream'],
  ] as const) {
    test(`${route}: answers an error, never a 200 or a stream`, async () => {
      const response = await failing.post(route, { message: 'hi', model: 'gpt-test' }, { accept });
      assert.equal(response.status, 500);
      assert.match(response.headers.get('content-type') ?? '', /application\/json/);
      const body = (await response.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'internal');
    });
  }
});
