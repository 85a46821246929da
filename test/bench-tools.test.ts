/**
 * The benchmark tools measure what they claim: the mock upstream speaks the OpenAI wire format
 * well enough for the real `openai` provider, the SSE client decodes chunked SSE split anywhere
 * and times deltas, a disconnect reaches the mock as a closed request, and the open-loop
 * generator sends at its rate and counts non-2xx replies.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startMock, type MockUpstream } from '../bench/mock-upstream.js';
import { runOpenLoop } from '../bench/open-loop.js';
import { SseStream } from '../bench/sse-client.js';
import { bootServer, type TestServer } from './helpers/server.js';

let mock: MockUpstream;
let server: TestServer;

before(async () => {
  mock = await startMock({ port: 0, chunks: 4, intervalMs: 0, size: 8, unbounded: false });
  server = await bootServer({
    env: { BENCH_KEY: 'sk-bench' },
    config: {
      models: [{ id: 'mock-gpt', provider: 'openai', base_url: `http://127.0.0.1:${mock.port}/v1`, api_key_env: 'BENCH_KEY' }],
      default_model: 'mock-gpt',
      upstream: { retries: 0 },
    },
  });
});

after(async () => {
  await server.close();
  await mock.close();
});

describe('mock upstream through the real openai provider', () => {
  test('a paced reply arrives as one delta per chunk with the gaps the directive asked for', async () => {
    const stream = new SseStream({
      port: server.port,
      path: '/api/chat/stream',
      body: { message: 'Pace me. [mock chunks=5 interval_ms=40 size=8]' },
      dialect: 'colloquy',
    });
    await stream.finished;
    assert.equal(stream.error, undefined);
    assert.equal(stream.completed, true);
    assert.equal(stream.deltas, 5);
    assert.equal(stream.gaps.length, 4);
    // The first delta may wait for the quota commit (nothing is sent before it is durable), which
    // shortens the first gap on a loaded disk; the pacing shows in the gaps after it.
    // One late delta shortens the gap after it, so the pacing is checked over the span, not per gap.
    const paced = stream.gaps.slice(1);
    const span = paced.reduce((sum, gap) => sum + gap, 0);
    assert.ok(span >= paced.length * 40 * 0.75, `gaps ${paced.join(', ')} ms`);
    for (const gap of paced) assert.ok(gap < 400, `gap ${gap} ms`);
    assert.ok(stream.firstDeltaAt > stream.startedAt);
  });

  test('a non-streaming chat returns the mock text and the mock counts a streamed upstream call or a JSON one', async () => {
    const before = mock.stats();
    const response = await server.post('/api/chat/', { message: 'Hello [mock chunks=3 size=5]' });
    assert.equal(response.status, 200);
    const body = (await response.json()) as { response: string };
    assert.equal(body.response, 'The quick brown');
    const after = mock.stats();
    assert.equal(after.stream_requests + after.json_requests, before.stream_requests + before.json_requests + 1);
  });

  test('a client that disconnects on its first delta makes the mock see its request closed', async () => {
    const closed = new Promise<number>((resolve) => {
      const listener = (tag: string | undefined, at: number) => {
        if (tag !== 'bye') return;
        mock.events.off('closed', listener);
        resolve(at);
      };
      mock.events.on('closed', listener);
    });
    let disconnectedAt = 0;
    const stream = new SseStream({
      port: server.port,
      path: '/api/chat/stream',
      body: { message: 'Talk. [mock chunks=1000 interval_ms=20 tag=bye]' },
      dialect: 'colloquy',
      onFirstDelta: (self) => {
        disconnectedAt = performance.now();
        self.destroy();
      },
    });
    await stream.finished;
    const closedAt = await closed;
    assert.ok(disconnectedAt > 0);
    assert.ok(
      closedAt >= disconnectedAt && closedAt - disconnectedAt < 1000,
      `closed ${closedAt - disconnectedAt} ms after the disconnect`,
    );
  });
});

describe('SSE client', () => {
  test('decodes chunked SSE delivered one byte at a time and reports an error event', async () => {
    const body =
      'event: start\ndata: {}\n\nevent: delta\ndata: {"text":"a"}\n\nevent: delta\ndata: {"text":"b"}\n\nevent: done\ndata: {}\n\n';
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const raw = createNetServer((socket) => {
      socket.once('data', async () => {
        const bytes = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`);
        for (const byte of bytes) {
          socket.write(Buffer.from([byte]));
          await new Promise((resolve) => setImmediate(resolve));
        }
      });
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    try {
      const stream = new SseStream({ port: (raw.address() as AddressInfo).port, path: '/', body: {}, dialect: 'colloquy' });
      await stream.finished;
      assert.equal(stream.error, undefined);
      assert.equal(stream.completed, true);
      assert.equal(stream.deltas, 2);
    } finally {
      raw.close();
    }
  });
});

describe('open-loop generator', () => {
  let target: Server;
  let port: number;

  before(async () => {
    let count = 0;
    target = createServer((_request, response) => {
      const number = ++count;
      // Every fourth request fails, and each reply takes 5 ms.
      setTimeout(() => {
        response.writeHead(number % 4 === 0 ? 500 : 200, { 'content-type': 'text/plain' });
        response.end('ok');
      }, 5);
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    port = (target.address() as AddressInfo).port;
  });

  after(() => {
    target.closeAllConnections();
    target.close();
  });

  test('sends rate × duration requests, counts the non-2xx ones and measures at least the reply delay', async () => {
    const result = await runOpenLoop({ url: `http://127.0.0.1:${port}/`, connections: 4, durationSeconds: 1, rate: 200 });
    assert.equal(result.requests, 200);
    assert.equal(result.errors, 0);
    assert.equal(result.non2xx, 50);
    assert.ok(result.p50_ms >= 5, `p50 ${result.p50_ms} ms`);
    assert.ok(result.rps > 100 && result.rps <= 160, `rps ${result.rps}`);
  });
});
