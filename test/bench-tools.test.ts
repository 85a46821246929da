/**
 * The benchmark tools measure what they claim: the mock upstream speaks the OpenAI wire format
 * well enough for the real `openai` provider, the SSE client decodes chunked SSE split anywhere
 * and times deltas, a disconnect reaches the mock as a closed request, the open-loop
 * generator sends at its rate and counts non-2xx replies, and the bare reference proxy relays the
 * mock's answer and, with `--quota`, takes one durable quota unit and leaves one usage record per
 * request in a real LMDB environment.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startMock, type MockUpstream } from '../bench/mock-upstream.js';
import { runOpenLoop } from '../bench/open-loop.js';
import { SseStream } from '../bench/sse-client.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { LmdbQuotaCounters } from '../src/store/lmdb-quota.js';
import { LmdbUsageStore } from '../src/store/lmdb-usage.js';
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
    assert.ok(result.rps > 75 && result.rps <= 160, `rps ${result.rps}`);
  });
});

describe('bare reference proxy', () => {
  let proxy: ChildProcess;
  let port: number;
  let data: string;

  before(async () => {
    data = mkdtempSync(join(tmpdir(), 'colloquy-bare-proxy-'));
    const script = fileURLToPath(new URL('../bench/bare-proxy.js', import.meta.url));
    proxy = spawn(process.execPath, [script, '--upstream', String(mock.port), '--quota', data], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: proxy.stdout! });
    const [line] = (await once(lines, 'line')) as [string];
    port = (JSON.parse(line) as { port: number }).port;
  });

  after(async () => {
    const exited = once(proxy, 'exit');
    proxy.kill('SIGTERM');
    await exited;
    rmSync(data, { recursive: true, force: true });
  });

  test('relays the mock answer and takes one durable quota unit and one usage record per request', async () => {
    for (let index = 0; index < 3; index += 1) {
      const response = await fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'Hello [mock chunks=3 size=5]', model: 'mock-gpt' }),
      });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { reply: 'The quick brown' });
    }
    // The same LMDB environment, read from this process while the proxy runs.
    const storage = new LmdbStorage(data);
    try {
      const counters = new LmdbQuotaCounters(storage);
      // Each reply waited for its take to be durable: all three are counted already.
      const taken = await counters.used('anonymous:127.0.0.1', { start: 0, lengthMs: 3_600_000 });
      assert.equal(taken.used, 3);
      // Usage records ride the next take's commit or go after a few milliseconds.
      const usage = new LmdbUsageStore(storage);
      let records = 0;
      for (let attempt = 0; attempt < 50 && records < 3; attempt += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        records = 0;
        for await (const record of usage.range(0, Date.now() + 1000, 'anonymous:127.0.0.1')) {
          assert.equal(record.model, 'mock-gpt');
          records += 1;
        }
      }
      assert.equal(records, 3);
    } finally {
      await storage.close();
    }
  });
});
