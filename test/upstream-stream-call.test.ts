/**
 * The streamed upstream client against a real loopback node:http server, read the way providers
 * read it: each call reported to the observer exactly once with its outcome, the socket reused
 * after a reply stopped at its terminal frame, an abort closing the socket at once, a stalled
 * reader pausing the socket instead of buffering the reply, Retry-After honoured before the
 * first byte, redirects refused, and the first-byte and idle clocks; and the same reads through
 * `pull`, the callbacks the frame loop reads with.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../src/errors.js';
import type { CallOutcome } from '../src/upstream/observer.js';
import { UpstreamClient, type UpstreamSettings } from '../src/upstream/stream-call.js';
import { waitFor } from './helpers/wait.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const state = { connections: 0, closed: 0, hits: [] as string[], flooded: 0, retryAfterHits: 0, bodiesEnded: 0 };

const routes = new Map<string, Handler>([
  ['/ok', (_request, response) => response.writeHead(200).end('one two three')],
  [
    // The terminal frame travels apart from the end of the body, as from real servers.
    '/done-then-end',
    (_request, response) => {
      response.writeHead(200).write('[DONE]');
      setTimeout(() => response.end('trailing', () => (state.bodiesEnded += 1)), 30);
    },
  ],
  ['/stall-after-first', (_request, response) => response.writeHead(200).write('first')],
  ['/headers-only', (_request, response) => response.writeHead(200).flushHeaders()],
  ['/redirect', (_request, response) => response.writeHead(307, { location: '/ok' }).end()],
  [
    '/busy-once',
    (_request, response) => {
      state.retryAfterHits += 1;
      if (state.retryAfterHits === 1) response.writeHead(503, { 'retry-after': '1' }).end('busy');
      else response.writeHead(200).end('recovered');
    },
  ],
  [
    '/flood',
    (_request, response) => {
      response.writeHead(200);
      const piece = 'x'.repeat(16 * 1024);
      const pump = () => {
        while (!response.destroyed && state.flooded < 64 * 1024 * 1024) {
          state.flooded += piece.length;
          if (!response.write(piece)) {
            response.once('drain', pump);
            return;
          }
        }
      };
      pump();
    },
  ],
]);

let server: Server;
let base: string;

before(async () => {
  server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      state.hits.push(request.url ?? '');
      routes.get(request.url ?? '')?.(request, response);
    });
  });
  server.on('connection', (socket: Socket) => {
    state.connections += 1;
    socket.on('close', () => (state.closed += 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const SETTINGS: UpstreamSettings = {
  connectTimeoutMs: 1000,
  firstByteTimeoutMs: 300,
  idleTimeoutMs: 300,
  retries: 1,
  maxFrameBytes: 65_536,
};

/** A client whose observer collects every outcome it is told. */
function client(settings: Partial<UpstreamSettings> = {}): { upstream: UpstreamClient; outcomes: string[] } {
  const outcomes: string[] = [];
  const upstream = new UpstreamClient(
    { ...SETTINGS, ...settings },
    { settled: (_provider, outcome: CallOutcome, _seconds, failure) => outcomes.push(failure ? `${outcome}:${failure.reason}` : outcome) },
  );
  return { upstream, outcomes };
}

const call = (path: string) => ({ subject: 'test', url: `${base}${path}`, headers: {}, body: { hello: 'world' } });

/** Reads a whole reply as text, or the error it failed with. */
async function readAll(upstream: UpstreamClient, path: string, signal = new AbortController().signal): Promise<string | unknown> {
  let text = '';
  try {
    for await (const chunk of upstream.stream(call(path), signal)) text += Buffer.from(chunk).toString();
  } catch (error) {
    return error;
  }
  return text;
}

/** A call to the flooding route whose first read (which sends the request) was taken; nothing more is read. */
async function startFlood() {
  const { upstream, outcomes } = client({ idleTimeoutMs: 10_000 });
  state.flooded = 0;
  const controller = new AbortController();
  const body = upstream.stream(call('/flood'), controller.signal);
  await body.next();
  return { upstream, outcomes, controller, body };
}

/**
 * An abort made at `started` failed the waiting read at once, closed the socket (`closed` sockets
 * had closed before it) and was reported once, as aborted.
 */
/** A client whose call the test aborts while it waits for more, the count of closed sockets before it, and the reason. */
function abortable() {
  return {
    ...client({ idleTimeoutMs: 10_000 }),
    closed: state.closed,
    controller: new AbortController(),
    reason: new Error('client went away'),
  };
}

async function assertAbortedAtOnce(started: number, closed: number, outcomes: string[]): Promise<void> {
  assert.ok(performance.now() - started < 100, 'the read failed at once');
  await waitFor(() => state.closed > closed, 500);
  assert.deepEqual(outcomes, ['aborted']);
}

describe('UpstreamClient.stream', () => {
  test('a whole reply is read and reported once as ok; nothing is sent before the first read', async () => {
    const { upstream, outcomes } = client();
    const hits = state.hits.length;
    const unread = upstream.stream(call('/ok'), new AbortController().signal);
    await sleep(20);
    assert.equal(state.hits.length, hits, 'a stream that is never read sends nothing');
    await unread.return(undefined);
    assert.equal(await readAll(upstream, '/ok'), 'one two three');
    assert.deepEqual(outcomes, ['ok']);
    await upstream.close();
  });

  test('stopping at the terminal frame keeps the socket: the rest is drained and the next call reuses it', async () => {
    const { upstream, outcomes } = client();
    const connections = state.connections;
    const ended = state.bodiesEnded;
    for (let index = 0; index < 3; index += 1) {
      for await (const chunk of upstream.stream(call('/done-then-end'), new AbortController().signal)) {
        if (Buffer.from(chunk).toString().includes('[DONE]')) break;
      }
      // The next call goes once the body's end has been sent, so the connection is free again.
      await waitFor(() => state.bodiesEnded > ended + index);
      await sleep(20);
    }
    assert.equal(state.connections - connections, 1, 'one connection served all three calls');
    assert.deepEqual(outcomes, ['ok', 'ok', 'ok']);
    await upstream.close();
  });

  test('an abort rejects the waiting read with its reason at once and closes the socket', async () => {
    const { upstream, outcomes, closed, controller, reason } = abortable();
    const iterator = upstream.stream(call('/stall-after-first'), controller.signal);
    assert.equal(Buffer.from((await iterator.next()).value as Uint8Array).toString(), 'first');
    const pending = iterator.next();
    const started = performance.now();
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    await assertAbortedAtOnce(started, closed, outcomes);
    await upstream.close();
  });

  test('a reader that stops reading pauses the socket instead of buffering the reply, and its abort closes it', async () => {
    const { upstream, outcomes, controller, body: iterator } = await startFlood();
    await sleep(300);
    // Kernel buffers on both sides take some; the client itself holds about 16 KiB.
    assert.ok(state.flooded < 32 * 1024 * 1024, `the upstream wrote ${state.flooded} bytes to a paused reader`);
    const flooded = state.flooded;
    await sleep(200);
    assert.equal(state.flooded, flooded, 'the upstream is held back while nobody reads');
    const closed = state.closed;
    const reason = new Error('gone');
    controller.abort(reason);
    await waitFor(() => state.closed > closed, 500);
    // The queued bytes are dropped with the socket: the next read fails with the abort.
    await assert.rejects(iterator.next(), (error) => error === reason);
    assert.deepEqual(outcomes, ['aborted']);
    await upstream.close();
  });

  test('a 503 with Retry-After is retried after the wait it asks for, before the first byte', async () => {
    const { upstream, outcomes } = client();
    state.retryAfterHits = 0;
    const started = performance.now();
    assert.equal(await readAll(upstream, '/busy-once'), 'recovered');
    assert.ok(performance.now() - started >= 950, 'Retry-After: 1 was honoured');
    assert.equal(state.retryAfterHits, 2);
    assert.deepEqual(outcomes, ['ok']);
    await upstream.close();
  });

  test('a redirect is refused, not followed, and reported as an error', async () => {
    const { upstream, outcomes } = client();
    const hits = state.hits.length;
    const error = await readAll(upstream, '/redirect');
    assert.ok(error instanceof ApiError && error.code === 'upstream_error', String(error));
    assert.match(error.message, /redirect/);
    assert.deepEqual(state.hits.slice(hits), ['/redirect']);
    assert.deepEqual(outcomes, ['error:status_307']);
    await upstream.close();
  });

  test('headers without a body trip the first-byte clock; a body that stops trips the idle clock', async () => {
    const { upstream, outcomes } = client({ retries: 0 });
    const first = await readAll(upstream, '/headers-only');
    assert.ok(first instanceof ApiError && first.code === 'upstream_timeout', String(first));
    const idle = await readAll(upstream, '/stall-after-first');
    assert.ok(idle instanceof ApiError && idle.code === 'upstream_timeout', String(idle));
    assert.deepEqual(outcomes, ['timeout:timeout_first_byte', 'timeout:timeout_idle']);
    await upstream.close();
  });

  test('a refused connection is retried, then reported as unreachable with its socket error code', async () => {
    const gone = createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const { port } = gone.address() as AddressInfo;
    await new Promise<void>((resolve) => gone.close(() => resolve()));
    const { upstream, outcomes } = client();
    const error = await (async () => {
      try {
        for await (const _ of upstream.stream({ ...call('/ok'), url: `http://127.0.0.1:${port}/ok` }, new AbortController().signal)) {
        }
      } catch (caught) {
        return caught;
      }
    })();
    assert.ok(error instanceof ApiError && error.code === 'upstream_error', String(error));
    assert.deepEqual(outcomes, ['error:connect_ECONNREFUSED']);
    await upstream.close();
  });
});

/** Reads a whole reply through `pull` (the frame loop's way), as text, or the error it failed with; counts reads that were ready at once. */
async function readAllPulled(
  upstream: UpstreamClient,
  path: string,
  signal = new AbortController().signal,
  onText: (text: string) => void = () => {},
): Promise<{ text: string; error?: unknown; atOnce: number }> {
  const body = upstream.stream(call(path), signal);
  let text = '';
  let atOnce = 0;
  return new Promise((resolve) => {
    const onError = (error: unknown) => resolve({ text, error, atOnce });
    const onRead = (result: IteratorResult<Uint8Array>): void => {
      for (;;) {
        if (result.done) {
          resolve({ text, atOnce });
          return;
        }
        text += Buffer.from(result.value).toString();
        onText(text);
        let next: IteratorResult<Uint8Array> | undefined;
        try {
          next = body.pull(onRead, onError);
        } catch (error) {
          onError(error);
          return;
        }
        if (next === undefined) return;
        atOnce += 1;
        result = next;
      }
    };
    body.pull(onRead, onError);
  });
}

describe('UpstreamClient.stream read through pull (callbacks, no promise per read)', () => {
  test('a whole reply is read and reported once as ok', async () => {
    const { upstream, outcomes } = client();
    const read = await readAllPulled(upstream, '/ok');
    assert.equal(read.error, undefined);
    assert.equal(read.text, 'one two three');
    assert.deepEqual(outcomes, ['ok']);
    await upstream.close();
  });

  test('the first-byte and idle clocks run while a pull waits', async () => {
    const { upstream, outcomes } = client({ retries: 0 });
    const first = await readAllPulled(upstream, '/headers-only');
    assert.ok(first.error instanceof ApiError && first.error.code === 'upstream_timeout', String(first.error));
    const idle = await readAllPulled(upstream, '/stall-after-first');
    assert.equal(idle.text, 'first');
    assert.ok(idle.error instanceof ApiError && idle.error.code === 'upstream_timeout', String(idle.error));
    assert.deepEqual(outcomes, ['timeout:timeout_first_byte', 'timeout:timeout_idle']);
    await upstream.close();
  });

  test('an abort fails the waiting pull with its reason at once and closes the socket', async () => {
    const { upstream, outcomes, closed, controller, reason } = abortable();
    let received = '';
    const reading = readAllPulled(upstream, '/stall-after-first', controller.signal, (text) => {
      received = text;
    });
    // The first chunk has been read: the abort finds the reader waiting inside pull.
    await waitFor(() => received === 'first');
    const started = performance.now();
    controller.abort(reason);
    const read = await reading;
    assert.equal(read.text, 'first');
    assert.equal(read.error, reason);
    await assertAbortedAtOnce(started, closed, outcomes);
    await upstream.close();
  });

  test('chunks queued while nobody pulled are handed over at once by the next pull', async () => {
    // Nobody pulls while the upstream floods.
    const { upstream, outcomes, controller, body } = await startFlood();
    await sleep(200);
    const ready = body.pull(
      () => assert.fail('a queued chunk comes back at once, not through the callback'),
      () => assert.fail('no failure'),
    );
    assert.ok(ready !== undefined && !ready.done && ready.value.byteLength > 0, 'the queue came back at once');
    const reason = new Error('done');
    controller.abort(reason);
    // The abort dropped what was queued: the next pull throws it at once.
    assert.throws(
      () =>
        body.pull(
          () => assert.fail('no read after the abort'),
          () => assert.fail('thrown, not called back'),
        ),
      (error) => error === reason,
    );
    assert.deepEqual(outcomes, ['aborted']);
    await upstream.close();
  });
});
