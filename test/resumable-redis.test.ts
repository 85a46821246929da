import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { RedisStreamLog } from '../src/store/redis-stream-log.js';
import type { RedisStorage } from '../src/store/redis.js';
import { type RedisServer, startRedisServer } from './helpers/redis-server.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { type RecordedRequest, type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';
import { readUntil, type Frame } from './helpers/sse-frames.js';
import { waitFor } from './helpers/wait.js';

/**
 * Resumable streams across nodes: two servers share one Redis (one prefix), a stream started on A
 * is resumed through B with Last-Event-ID (the same events, in order, no gap, no duplicate), a
 * cancel sent through B stops the generation running on A, and a log past its TTL is gone from
 * Redis. No node keeps anything in its data directory.
 */

const ADMIN = { authorization: 'Bearer admin-nodes' };
const WORDS = Array.from({ length: 30 }, (_, index) => `w${index} `);
const ANSWER = WORDS.join('');
let redis: RedisServer;
let upstream: ReplayUpstream;
let nodeA: TestServer;
let nodeB: TestServer;
let alice: Record<string, string>;

function chunk(content: string): string {
  return `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
}

/** Paced words: 20 ms each, 60 ms for "slow". */
async function answer(recorded: RecordedRequest, response: ServerResponse): Promise<void> {
  const text: string = recorded.body?.messages?.at(-1)?.content ?? '';
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  const pace = text.includes('slow') ? 60 : 20;
  for (const word of WORDS) {
    if (response.destroyed) return;
    response.write(chunk(word));
    await new Promise((resolve) => setTimeout(resolve, pace));
  }
  response.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
  response.end('data: [DONE]\n\n');
}

async function boot(): Promise<TestServer> {
  return bootServer({
    env: { COLLOQUY_REDIS_URL: redis.url, COLLOQUY_REDIS_PREFIX: 'shared:', COLLOQUY_ADMIN_TOKEN: 'admin-nodes' },
    config: {
      models: [{ id: 'paced', provider: 'openai', base_url: `${upstream.url}/v1` }],
      default_model: 'paced',
      upstream: { retries: 0, idle_timeout_ms: 5000 },
      plans: { free: { quota: 100, window_seconds: 86_400 } },
      resumable: { max_bytes: 65_536, ttl_s: 2, detached_timeout_s: 5 },
    },
  });
}

before(async () => {
  redis = await startRedisServer();
  upstream = await startUpstream((_request, response, recorded) => answer(recorded, response));
  nodeA = await boot();
  nodeB = await boot();
  assert.equal((await nodeA.post('/api/admin/users', { user_id: 'alice' }, ADMIN)).status, 201);
  const key = ((await (await nodeA.post('/api/admin/users/alice/keys', '', ADMIN)).json()) as { key: string }).key;
  alice = { authorization: `Bearer ${key}` };
});

after(async () => {
  await nodeA?.close();
  await nodeB?.close();
  await upstream?.close();
  await redis?.close();
});

const seqOf = (frame: Frame | undefined) => Number(frame?.id?.split(':')[1]);
const deltas = (frames: Frame[]) =>
  frames
    .filter((frame) => frame.event === 'delta')
    .map((frame) => frame.data.text)
    .join('');

function startStream(server: TestServer, message: string): Promise<Response> {
  return server.fetch('/api/chat/stream', {
    method: 'POST',
    headers: { ...alice, 'content-type': 'application/json' },
    body: JSON.stringify({ resumable: true, message }),
  });
}

function resume(server: TestServer, streamId: string, lastEventId?: string): Promise<Response> {
  return server.fetch(`/api/chat/stream/${streamId}`, { headers: { ...alice, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } });
}

describe('resumable streams across two nodes on one Redis', () => {
  test('a stream started on A resumes through B with Last-Event-ID: the same events, in order, no gap, no duplicate', async () => {
    const seen = await readUntil(
      await startStream(nodeA, 'count for me'),
      (frames) => frames.filter((f) => f.event === 'delta').length === 3,
    );
    const streamId: string = seen.find((frame) => frame.event === 'start')?.data.stream_id;
    assert.match(streamId, /^st_[0-9a-f]{24}$/);
    assert.ok(nodeA.services.resumable.live(streamId), 'the generation runs on A');
    assert.equal(nodeB.services.resumable.live(streamId), undefined);

    const response = await resume(nodeB, streamId, seen.at(-1)?.id);
    assert.equal(response.status, 200);
    const rest = await readUntil(response);
    assert.equal(rest.at(-1)?.event, 'done');
    const all = [...seen, ...rest];
    assert.equal(deltas(all), ANSWER);
    // What B served is what the log holds: a full replay (through either node) has the same frames,
    // and the first read and the resume together have every frame of it once, in order.
    await waitFor(() => nodeA.services.resumable.live(streamId) === undefined);
    for (const node of [nodeA, nodeB]) {
      const replay = await readUntil(await resume(node, streamId));
      assert.deepEqual(all.map(seqOf), replay.map(seqOf));
      assert.deepEqual(rest, replay.slice(-rest.length));
      assert.deepEqual(
        all.map((frame) => frame.event),
        replay.map((frame) => frame.event),
      );
    }
  });

  test('a cancel sent through B stops the generation running on A', async () => {
    const index = upstream.requests.length;
    const seen = await readUntil(await startStream(nodeA, 'slow counting'), (frames) => frames.some((f) => f.event === 'delta'));
    const streamId: string = seen[0]?.data.stream_id;
    assert.ok(nodeA.services.resumable.live(streamId));
    const follower = resume(nodeB, streamId, seen.at(-1)?.id).then((response) => readUntil(response));
    const cancelled = await nodeB.fetch(`/api/chat/stream/${streamId}/cancel`, { method: 'POST', headers: alice });
    assert.deepEqual(await cancelled.json(), { stream_id: streamId, cancelled: true });
    assert.ok((await upstream.closed(index)) > 0, 'the upstream request was closed');
    const rest = await follower;
    assert.equal(rest.at(-1)?.event, 'done');
    assert.equal(rest.at(-1)?.data.finish_reason, 'cancelled');
    assert.ok(deltas([...seen, ...rest]).length < ANSWER.length);
    await waitFor(() => nodeA.services.resumable.live(streamId) === undefined);
    // Once ended, a second cancel has nothing to stop.
    const again = await nodeB.fetch(`/api/chat/stream/${streamId}/cancel`, { method: 'POST', headers: alice });
    assert.deepEqual(await again.json(), { stream_id: streamId, cancelled: false });
  });

  test('a log past its TTL is gone from Redis, for both nodes', async () => {
    const frames = await readUntil(await startStream(nodeA, 'count and end'), (seen) => seen.some((f) => f.event === 'done'));
    const streamId: string = frames[0]?.data.stream_id;
    await waitFor(async () => (await nodeB.services.resumable.log.metaOf(streamId))?.ended_at != null);
    const client = (nodeA.services.storage as RedisStorage).client;
    const keys = [`shared:stream:${streamId}`, `shared:stream-events:${streamId}`];
    assert.equal(await client.exists(keys), 2);
    const ttl = await client.pTTL(keys[0]!);
    assert.ok(ttl > 0 && ttl <= 2000, `the ended log expires within ttl_s (pttl ${ttl})`);
    const before = await resume(nodeB, streamId);
    assert.equal(before.status, 200);
    assert.equal(deltas(await readUntil(before)), ANSWER);
    await waitFor(async () => (await client.exists(keys)) === 0, 4000);
    assert.equal(await nodeB.services.resumable.log.metaOf(streamId), undefined);
    assert.equal((await resume(nodeB, streamId)).status, 204);
    assert.equal((await resume(nodeA, streamId)).status, 204);
  });

  test('a log its process never ended is swept once silent for the stale time; a kept-alive one stays', async () => {
    const storage = nodeA.services.storage as RedisStorage;
    const log = new RedisStreamLog(storage, { maxBytes: 1024, ttlMs: 1000, staleMs: 1000 });
    await log.create('st_left000000000000000000', 'alice');
    await log.create('st_alive00000000000000000', 'alice');
    await log.append('st_left000000000000000000', [{ seq: 1, json: '{"seq":1}' }]);
    // Both silent past the stale time, then one kept alive just before the sweep: the kept-alive one
    // has a whole stale time of margin however slow the round trips are.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await log.keepAlive(['st_alive00000000000000000']);
    assert.equal(await log.sweep(Date.now()), 1);
    assert.equal(await log.metaOf('st_left000000000000000000'), undefined);
    assert.equal(await storage.client.exists('shared:stream-events:st_left000000000000000000'), 0);
    assert.equal((await log.metaOf('st_alive00000000000000000'))?.owner, 'alice');
  });

  test('the byte bound keeps the newest events, and the nodes keep nothing in their data directories', async () => {
    const storage = nodeA.services.storage as RedisStorage;
    const log = new RedisStreamLog(storage, { maxBytes: 30, ttlMs: 1000 });
    await log.create('st_bound000000000000000000', 'alice');
    const events = Array.from({ length: 6 }, (_, index) => ({ seq: index + 1, json: `{"n":${index + 1}}` }));
    const meta = await log.append('st_bound000000000000000000', events);
    assert.deepEqual(meta, { owner: 'alice', first_seq: 3, last_seq: 6, bytes: 28, ended_at: null });
    const kept = [];
    for await (const event of log.after('st_bound000000000000000000', 0)) kept.push(event.seq);
    assert.deepEqual(kept, [3, 4, 5, 6]);
    for (const node of [nodeA, nodeB]) assert.deepEqual(readdirSync(node.dataDir), []);
  });
});
