import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSocket } from './helpers/raw-http.js';
import { bootServer, type TestServer } from './helpers/server.js';

const delta = (content: string) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

describe('a chat stream whose reader stalls', () => {
  let upstream: http.Server;
  let server: TestServer;
  let upstreamClosed = false;

  before(async () => {
    // Floods deltas for as long as the gateway reads them.
    upstream = http.createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const words = delta('lorem ipsum dolor sit amet '.repeat(20));
      let open = true;
      response.on('close', () => {
        open = false;
        upstreamClosed = true;
      });
      const pump = () => {
        while (open && response.write(words)) {}
        if (open) response.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    server = await bootServer({
      config: {
        models: [{ id: 'flood', provider: 'openai', base_url: `http://127.0.0.1:${port}/v1` }],
        stream_stall_timeout_ms: 400,
        // What a paused client's socket buffers can reach the default answer bound (4 MiB) on a host
        // whose TCP buffers grow large; an answer ended by that bound is a finished reply, not a stall.
        max_answer_bytes: 1024 * 1024 * 1024,
        upstream: { idle_timeout_ms: 60_000 },
      },
    });
  });
  after(async () => {
    await server.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  test('is closed after the stall timeout and its upstream request is cancelled', async () => {
    const socket = await openSocket(server.port);
    socket.on('error', () => {});
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    const body = JSON.stringify({ message: 'flood me', model: 'flood' });
    socket.write(
      `POST /api/chat/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    socket.pause();
    const stalledAt = performance.now();
    // The client sees nothing while paused: the server's close shows as the upstream request being
    // cancelled, and as the end of the stream once the client reads again.
    for (let waited = 0; waited < 15_000 && !upstreamClosed; waited += 50) await sleep(50);
    assert.ok(upstreamClosed, 'the upstream request was cancelled after the stall timeout');
    assert.ok(performance.now() - stalledAt < 15_000);
    let tail = '';
    socket.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('latin1')).slice(-4096);
    });
    socket.resume();
    const closedAt = await Promise.race([closed, sleep(10_000, -1, { ref: false })]);
    assert.notEqual(closedAt, -1, 'the server closed the stalled connection');
    // Cut off, not finished: the stream ends without its done event or the chunked terminator.
    assert.doesNotMatch(tail, /event: (done|error)/);
    assert.ok(!tail.endsWith('0\r\n\r\n'), 'the reply was not ended as a complete response');
    const metrics = await (await server.fetch('/metrics')).text();
    assert.match(metrics, /colloquy_active_streams 0/);
  });
});
