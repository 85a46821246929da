/**
 * What a streamed upstream reply holds in the process while its reader is behind, counted in
 * bytes: everything the client socket read from the kernel, less the response head and less what
 * the reader was handed, is what waits in the client (its queue, the socket's buffer, the read
 * undici's parser stopped in). A loopback upstream floods a reply with a declared length, so no
 * chunk framing blurs the count; the client socket is the one undici reports on its diagnostics
 * channel.
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { READ_BYTES } from '../src/upstream/connector.js';
import { UpstreamClient } from '../src/upstream/stream-call.js';

const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1000000000\r\n\r\n';
/** Most a paused reply may hold: a few socket reads and the queue's mark. */
const HELD_LIMIT = 6 * READ_BYTES;

let upstream: Server;
let port = 0;
/** Bytes the flooding upstream handed to its sockets. */
let flooded = 0;
/** Paths of the requests the upstream answered, in order. */
const requests: string[] = [];

/** Writes the head, then body bytes as fast as the socket takes them (a pause on backpressure). */
function flood(socket: Socket): void {
  socket.write(HEAD);
  const piece = Buffer.alloc(16 * 1024, 'x');
  const pump = (): void => {
    while (!socket.destroyed) {
      flooded += piece.length;
      if (!socket.write(piece)) {
        socket.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

/** Sends a body of `pieces` writes of `size` bytes, `gapMs` apart. */
async function trickle(socket: Socket, pieces: number, size: number, gapMs: number): Promise<void> {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${pieces * size}\r\n\r\n`);
  for (let index = 0; index < pieces; index += 1) {
    socket.write(Buffer.alloc(size, 'a'));
    await sleep(gapMs);
  }
}

/** The last trickled reply, settled once its last piece was written. */
let trickled: Promise<void> = Promise.resolve();

before(async () => {
  upstream = createServer((socket) => {
    socket.on('error', () => undefined);
    let head = '';
    const onData = (data: Buffer): void => {
      head += data.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      socket.resume();
      const path = head.split(' ')[1] ?? '';
      requests.push(path);
      if (path === '/flood') flood(socket);
      else trickled = trickle(socket, 10, 100, 5);
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = (upstream.address() as AddressInfo).port;
});

after(async () => {
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

/** A client, and the sockets its agent connected (from undici's diagnostics channel). */
function client(): { upstream: UpstreamClient; sockets: Socket[]; done(): Promise<void> } {
  const sockets: Socket[] = [];
  const onConnected = (message: unknown): void => {
    sockets.push((message as { socket: Socket }).socket);
  };
  subscribe('undici:client:connected', onConnected);
  const settings = { connectTimeoutMs: 1000, firstByteTimeoutMs: 2000, idleTimeoutMs: 10_000, retries: 0, maxFrameBytes: 65_536 };
  const upstreamClient = new UpstreamClient(settings);
  return {
    upstream: upstreamClient,
    sockets,
    done: async () => {
      unsubscribe('undici:client:connected', onConnected);
      await upstreamClient.close();
    },
  };
}

const call = (path: string) => ({ subject: 'test', url: `http://127.0.0.1:${port}${path}`, headers: {}, body: { hello: 'world' } });

/** Waits until the socket has read nothing new for a while: every buffer on the way is full. */
async function untilStill(socket: Socket): Promise<void> {
  let last = -1;
  let still = 0;
  for (let round = 0; round < 300 && still < 5; round += 1) {
    await sleep(20);
    still = socket.bytesRead === last ? still + 1 : 0;
    last = socket.bytesRead;
  }
  assert.equal(still, 5, 'the socket kept reading');
}

describe('a streamed reply behind its reader', () => {
  test('a plain-TCP upstream socket reads and buffers READ_BYTES at most', async () => {
    const { upstream: upstreamClient, sockets, done } = client();
    const controller = new AbortController();
    const iterator = upstreamClient.stream(call('/flood'), controller.signal);
    await iterator.next();
    assert.equal(sockets.length, 1);
    assert.equal(sockets[0]!.readableHighWaterMark, READ_BYTES);
    await untilStill(sockets[0]!);
    assert.ok(sockets[0]!.readableLength <= 2 * READ_BYTES, `the socket buffers ${sockets[0]!.readableLength} bytes`);
    controller.abort(new Error('done'));
    await done();
  });

  test('a reader that stopped after one chunk leaves a few small reads in the process, while the upstream is held back', async () => {
    const { upstream: upstreamClient, sockets, done } = client();
    flooded = 0;
    const controller = new AbortController();
    const iterator = upstreamClient.stream(call('/flood'), controller.signal);
    const first = (await iterator.next()).value as Uint8Array;
    const socket = sockets[0]!;
    await untilStill(socket);
    const held = socket.bytesRead - HEAD.length - first.byteLength;
    assert.ok(held <= HELD_LIMIT, `${held} bytes held for a reader that stopped (limit ${HELD_LIMIT})`);
    assert.ok(flooded > socket.bytesRead + 1024 * 1024, 'the upstream had much more to send');
    controller.abort(new Error('done'));
    await assert.rejects(iterator.next());
    await done();
  });

  test('a slow reader: what waits for it stays bounded read after read', async () => {
    const { upstream: upstreamClient, sockets, done } = client();
    const controller = new AbortController();
    const iterator = upstreamClient.stream(call('/flood'), controller.signal);
    let consumed = 0;
    let most = 0;
    for (let read = 0; read < 400; read += 1) {
      consumed += ((await iterator.next()).value as Uint8Array).byteLength;
      // Slower than the upstream: the socket fills between two reads.
      await nextTurn();
      await nextTurn();
      most = Math.max(most, sockets[0]!.bytesRead - HEAD.length - consumed);
    }
    assert.ok(consumed > 400 * 1024, `the reader got ${consumed} bytes`);
    assert.ok(most <= HELD_LIMIT, `up to ${most} bytes waited for the reader (limit ${HELD_LIMIT})`);
    controller.abort(new Error('done'));
    await done();
  });

  test('everything that arrived while nobody read is handed over in one read', async () => {
    const { upstream: upstreamClient, done } = client();
    const iterator = upstreamClient.stream(call('/trickle'), new AbortController().signal);
    const first = (await iterator.next()).value as Uint8Array;
    // Every piece written, and a moment for it to cross loopback while nobody reads.
    await trickled;
    await sleep(50);
    const rest = (await iterator.next()).value as Uint8Array;
    assert.equal(first.byteLength + rest.byteLength, 1000);
    assert.equal(Buffer.from(rest).toString(), 'a'.repeat(rest.byteLength));
    assert.equal((await iterator.next()).done, true);
    await done();
  });
});
