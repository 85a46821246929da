import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, type RecordedRequest, type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';
import { readUntil, type Frame } from './helpers/sse-frames.js';

/**
 * Resumable streams: a dropped client reconnects with Last-Event-ID and reads the rest, with no
 * gap and no duplicate; the generation goes on without it for a while; only the owner may resume;
 * the log is bounded; a cancel stops the generation on purpose; the quota is paid once.
 */

const ADMIN = { authorization: 'Bearer admin-resume' };
const WORDS = Array.from({ length: 30 }, (_, index) => `w${index} `);
const ANSWER = WORDS.join('');
let upstream: ReplayUpstream;
let server: TestServer;
let alice: Record<string, string>;
let bob: Record<string, string>;

function chunk(content: string): string {
  return `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
}

/** Paced words (20 ms each, 60 ms for "slow", 2 ms for "quick"), "long" sends 600 at once. */
async function answer(recorded: RecordedRequest, response: ServerResponse): Promise<void> {
  const text: string = recorded.body?.messages?.at(-1)?.content ?? '';
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  const words = text.includes('long') ? Array.from({ length: 600 }, (_, index) => `long${index} `) : WORDS;
  const pace = text.includes('long') ? 0 : text.includes('slow') ? 60 : text.includes('quick') ? 2 : 20;
  for (const word of words) {
    if (response.destroyed) return;
    response.write(chunk(word));
    if (pace > 0) await new Promise((resolve) => setTimeout(resolve, pace));
  }
  response.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
  response.end('data: [DONE]\n\n');
}

before(async () => {
  upstream = await startUpstream((_request, response, recorded) => answer(recorded, response));
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-resume' },
    config: {
      models: [{ id: 'paced', provider: 'openai', base_url: `${upstream.url}/v1` }],
      default_model: 'paced',
      upstream: { retries: 0, idle_timeout_ms: 5000 },
      plans: { free: { quota: 100, window_seconds: 86_400 } },
      resumable: { max_bytes: 8192, ttl_s: 2, detached_timeout_s: 1 },
    },
  });
  for (const user of ['alice', 'bob']) assert.equal((await server.post('/api/admin/users', { user_id: user }, ADMIN)).status, 201);
  const key = async (user: string) => ({
    authorization: `Bearer ${((await (await server.post(`/api/admin/users/${user}/keys`, '', ADMIN)).json()) as { key: string }).key}`,
  });
  alice = await key('alice');
  bob = await key('bob');
});

after(async () => {
  await server.close();
  await upstream.close();
});

const deltas = (frames: Frame[]) =>
  frames
    .filter((frame) => frame.event === 'delta')
    .map((frame) => frame.data.text)
    .join('');

function startStream(body: Record<string, unknown>, headers = alice): Promise<Response> {
  return server.fetch('/api/chat/stream', {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ resumable: true, ...body }),
  });
}

function resume(streamId: string, lastEventId: string | undefined, headers = alice): Promise<Response> {
  return server.fetch(`/api/chat/stream/${streamId}`, {
    headers: { ...headers, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  });
}

async function quotaUsed(user: string): Promise<number> {
  return ((await (await server.fetch(`/api/chat/quota/${user}`, { headers: ADMIN })).json()) as any).used;
}

describe('resumable streams', () => {
  test('a client that drops after three deltas resumes with Last-Event-ID: no gap, no duplicate, paid once', async () => {
    const used = await quotaUsed('alice');
    const first = await startStream({ message: 'count for me' });
    assert.equal(first.status, 200);
    const seen = await readUntil(first, (frames) => frames.filter((frame) => frame.event === 'delta').length === 3);
    const start = seen.find((frame) => frame.event === 'start');
    const streamId: string = start?.data.stream_id;
    assert.match(streamId, /^st_[0-9a-f]{24}$/);
    for (const frame of seen) assert.match(frame.id ?? '', new RegExp(`^${streamId}:\\d+$`));
    const rest = parseSse(await (await resume(streamId, seen.at(-1)?.id)).text());
    const resumedDeltas = rest
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.equal(deltas(seen) + resumedDeltas, ANSWER);
    assert.equal(rest.at(-1)?.event, 'done');
    assert.equal(await quotaUsed('alice'), used + 1);
  });

  test('a reconnect after the end replays from the log alone; ?after= works as Last-Event-ID does', async () => {
    // Quick words: the generation finishes well inside detached_timeout_s on a loaded host too.
    const first = await startStream({ message: 'quick count again' });
    const seen = await readUntil(first, (frames) => frames.some((frame) => frame.event === 'delta'));
    const streamId: string = seen[0]?.data.stream_id;
    // Wait for the generation to finish without any client.
    for (let wait = 0; wait < 100 && server.services.resumable.live(streamId); wait += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(server.services.resumable.live(streamId), undefined);
    const lastSeq = Number(seen.at(-1)?.id?.split(':')[1]);
    const rest = parseSse(await (await server.fetch(`/api/chat/stream/${streamId}?after=${lastSeq}`, { headers: alice })).text());
    assert.equal(
      deltas(seen) +
        rest
          .filter((event) => event.event === 'delta')
          .map((event) => event.data.text)
          .join(''),
      ANSWER,
    );
    // NDJSON resume: every line carries its seq, and the result has the whole answer.
    const lines = (await (await server.fetch(`/api/chat/progress/${streamId}?after=${lastSeq}`, { headers: alice })).text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.ok(lines.every((line) => typeof line.seq === 'number' && line.seq > lastSeq));
    assert.equal(lines.at(-1).type, 'result');
    assert.equal(lines.at(-1).response, ANSWER);
  });

  test('someone else’s stream, an unknown one, a malformed id and an expired one all answer 204', async () => {
    const first = await startStream({ message: 'private counting' });
    const seen = await readUntil(first, (frames) => frames.some((frame) => frame.event === 'done'));
    const streamId: string = seen[0]?.data.stream_id;
    assert.equal((await resume(streamId, undefined, bob)).status, 204);
    assert.equal((await resume('st_0123456789abcdef01234567', undefined)).status, 204);
    assert.equal((await resume('nope', undefined)).status, 204);
    assert.equal((await server.fetch(`/api/chat/stream/${streamId}/cancel`, { method: 'POST', headers: bob })).status, 204);
    assert.equal((await resume(streamId, undefined)).status, 200);
    // ttl_s is 2: after it the stream is gone for its owner too.
    await new Promise((resolve) => setTimeout(resolve, 2200));
    assert.equal((await resume(streamId, undefined)).status, 204);
  });

  test('the client that starts a stream gets all of it, even when the upstream sends more than max_bytes at once', async () => {
    // The burst comes as soon as the upstream answers: the first client must already be following,
    // or the log (and the run's memory) would drop the start before it reads (seen on Redis).
    for (let round = 0; round < 5; round++) {
      const frames = await readUntil(await startStream({ message: 'a long answer' }), (seen) =>
        seen.some((frame) => frame.event === 'done'),
      );
      assert.equal(frames[0]?.event, 'start', JSON.stringify(frames.slice(0, 2)));
      assert.equal(deltas(frames), Array.from({ length: 600 }, (_, index) => `long${index} `).join(''));
      assert.equal(frames.at(-1)?.event, 'done');
    }
  });

  test('a log past max_bytes keeps the newest events and says stream_expired to an old resume', async () => {
    const first = await startStream({ message: 'a long answer' });
    const frames = await readUntil(first, (seen) => seen.some((frame) => frame.event === 'done'));
    const streamId: string = frames[0]?.data.stream_id;
    const oldResponse = await resume(streamId, `${streamId}:2`);
    const oldText = await oldResponse.text();
    // The status and body say what went wrong if this ever fails (seen once, on Redis, in a CI run).
    assert.equal(oldResponse.status, 200, oldText);
    const old = parseSse(oldText);
    assert.equal(old.length, 1, oldText);
    assert.equal(old[0]?.event, 'error');
    assert.equal(old[0]?.data.error.code, 'stream_expired');
    // A resume inside the kept window still works.
    const lastSeq = Number(frames.at(-1)?.id?.split(':')[1]);
    const tail = parseSse(await (await resume(streamId, `${streamId}:${lastSeq - 3}`)).text());
    assert.deepEqual(
      tail.map((event) => event.event),
      frames.slice(-3).map((frame) => frame.event),
    );
  });

  test('cancel stops the generation: the upstream closes, followers get done "cancelled", the partial turn is stored', async () => {
    const index = upstream.requests.length;
    const first = await startStream({ message: 'slow counting', session_id: 'cancel-me' });
    const seen = await readUntil(first, (frames) => frames.some((frame) => frame.event === 'delta'));
    const streamId: string = seen[0]?.data.stream_id;
    const follower = resume(streamId, seen.at(-1)?.id);
    const cancelled = await server.fetch(`/api/chat/stream/${streamId}/cancel`, { method: 'POST', headers: alice });
    assert.deepEqual(await cancelled.json(), { stream_id: streamId, cancelled: true });
    const rest = parseSse(await (await follower).text());
    assert.equal(rest.at(-1)?.event, 'done');
    assert.equal(rest.at(-1)?.data.finish_reason, 'cancelled');
    assert.ok((await upstream.closed(index)) > 0);
    const session = (await (await server.fetch('/api/chat/session/cancel-me', { headers: alice })).json()) as any;
    assert.equal(session.messages.at(-1).incomplete, true);
    assert.ok(ANSWER.startsWith(session.messages.at(-1).content));
  });

  test('with no client for detached_timeout_s the generation stops; a late resume reads why', async () => {
    const index = upstream.requests.length;
    const first = await startStream({ message: 'slow and alone' });
    const seen = await readUntil(first, (frames) => frames.some((frame) => frame.event === 'delta'));
    const streamId: string = seen[0]?.data.stream_id;
    assert.ok((await upstream.closed(index)) > 0, 'the upstream request was closed after the detached timeout');
    const rest = parseSse(await (await resume(streamId, seen.at(-1)?.id)).text());
    assert.equal(rest.at(-1)?.event, 'error');
    assert.equal(rest.at(-1)?.data.error.code, 'stream_expired');
    // The run counts itself once its last log write landed: allow it that moment.
    let metrics = '';
    for (let wait = 0; wait < 50 && !/detached_generations_total\{outcome="expired"\} [1-9]/.test(metrics); wait += 1) {
      metrics = await (await server.fetch('/metrics')).text();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.match(metrics, /colloquy_detached_generations_total\{outcome="expired"\} [1-9]/);
    assert.match(metrics, /colloquy_stream_resumes_total [1-9]/);
  });

  test('resumable on the JSON route is a 400 before any quota is taken', async () => {
    const used = await quotaUsed('alice');
    const response = await server.post('/api/chat', { message: 'hi', resumable: true }, alice);
    assert.equal(response.status, 400);
    assert.equal(((await response.json()) as any).error.details[0].path, 'resumable');
    assert.equal(await quotaUsed('alice'), used);
  });
});
