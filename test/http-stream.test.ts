import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { abortSignalOf } from '../src/domain/cancel.js';
import type { HttpServer } from '../src/http/server.js';
import type { Route } from '../src/http/types.js';
import { startHttpServer } from './helpers/http-server.js';
import { openSocket, readUntil } from './helpers/raw-http.js';

const FRAME = `${'x'.repeat(64 * 1024 - 1)}\n`;
const FRAMES = 1024; // 64 MiB in all: far more than the kernel socket buffers can hide

/** GET /firehose: writes FRAMES frames as fast as backpressure allows; reports each frame and why it stopped. */
function firehoseRoute(onFrame: () => void, onStop: (reason: 'abort' | 'closed') => void): Route {
  return {
    method: 'GET',
    path: '/firehose',
    handler: async (context) => {
      const stream = context.stream({ contentType: 'application/x-ndjson' });
      for (let index = 0; index < FRAMES; index += 1) {
        if (!(await stream.write(FRAME))) {
          onStop(context.signal.aborted ? 'abort' : 'closed');
          return;
        }
        onFrame();
      }
      stream.end();
    },
  };
}

describe('the stream writer', () => {
  let server: HttpServer;
  let port: number;
  let produced = 0;
  let backpressureWaits = 0;
  let producerStoppedBy: string | undefined;
  let heartbeatSeen = false;

  const routes: Route[] = [
    firehoseRoute(
      () => {
        produced += 1;
      },
      (reason) => {
        producerStoppedBy = reason;
      },
    ),
    {
      method: 'GET',
      path: '/quiet',
      handler: async (context) => {
        const stream = context.stream({ contentType: 'text/event-stream', heartbeat: { intervalMs: 50, frame: ': ping\n\n' } });
        await sleep(500, undefined, { signal: abortSignalOf(context.signal) }).catch(() => {});
        heartbeatSeen = true;
        await stream.write('event: done\ndata: {}\n\n');
        stream.end();
      },
    },
  ];

  before(async () => {
    ({ server, port } = await startHttpServer(routes, {
      onBackpressure: () => {
        backpressureWaits += 1;
      },
    }));
  });
  after(() => server.close(100));

  it('pauses the producer while the client does not read, with bounded buffering, and resumes when it reads', async () => {
    produced = 0;
    const socket = await openSocket(port);
    socket.write('GET /firehose HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.pause();
    await sleep(400);
    const whilePaused = produced;
    await sleep(300);
    assert.equal(produced, whilePaused, 'the producer must not advance while the client is stalled');
    assert.ok(backpressureWaits > 0, 'the writer waited for a drain');
    const bufferedBytes = whilePaused * FRAME.length;
    assert.ok(whilePaused < FRAMES, 'the producer is paused before the end');
    // What the producer got ahead by is the kernel's socket buffers plus one frame, not the stream.
    assert.ok(bufferedBytes < 16 * 1024 * 1024, `producer ran ${bufferedBytes} bytes ahead of a stalled reader`);

    let received = 0;
    const finished = new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (chunk.subarray(-5).toString() === '0\r\n\r\n') resolve();
      });
    });
    socket.resume();
    await finished;
    assert.equal(produced, FRAMES, 'the producer resumed and finished once the client read');
    assert.ok(received > FRAMES * FRAME.length);
    socket.destroy();
  });

  it('stops the producer through the abort signal when the client goes away', async () => {
    produced = 0;
    producerStoppedBy = undefined;
    const socket = await openSocket(port);
    socket.write('GET /firehose HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.pause();
    await sleep(200);
    socket.destroy();
    for (let waited = 0; waited < 2000 && !producerStoppedBy; waited += 20) await sleep(20);
    assert.equal(producerStoppedBy, 'abort');
    assert.ok(produced < FRAMES);
  });

  it('sends heartbeat frames while nothing else is written, then ends cleanly', async () => {
    const socket = await openSocket(port);
    socket.write('GET /quiet HTTP/1.1\r\nHost: x\r\n\r\n');
    const text = await readUntil(socket, '0\r\n\r\n');
    assert.match(text, /content-type: text\/event-stream/i);
    assert.ok((text.match(/: ping/g) ?? []).length >= 2, 'at least two pings during 500 ms of silence');
    assert.match(text, /event: done/);
    assert.ok(heartbeatSeen);
    socket.destroy();
  });

  it('closes a stream whose client has not drained within the stall timeout, which stops the producer', async () => {
    let stoppedBy: string | undefined;
    const { server: stalling, port: stallingPort } = await startHttpServer(
      [
        firehoseRoute(
          () => {},
          (reason) => {
            stoppedBy = reason;
          },
        ),
      ],
      { streamStallTimeoutMs: 300 },
    );
    const socket = await openSocket(stallingPort);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {});
    socket.write('GET /firehose HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.pause();
    const started = performance.now();
    for (let waited = 0; waited < 3000 && !stoppedBy; waited += 20) await sleep(20);
    assert.equal(stoppedBy, 'abort', 'the stalled stream was closed and its producer told through the signal');
    assert.ok(performance.now() - started < 2500);
    socket.resume();
    await closed;
    await stalling.close(10);
  });
});
