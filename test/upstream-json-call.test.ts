/**
 * The shared JSON upstream call against a real loopback node:http server: the deadline, the size
 * cap (declared and streamed), redirects left unfollowed, malformed JSON flagged, a client abort
 * rejecting with its own reason, and the outcome each call reports.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ApiError } from '../src/errors.js';
import { callJson, type JsonCallRequest } from '../src/upstream/json-call.js';
import type { CallOutcome } from '../src/upstream/observer.js';
import { waitFor } from './helpers/wait.js';

const SECRET = 'sk-json-call-secret-0123456789';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Answers by path; a path it does not know stalls, so a test that reaches it times out loudly. */
const routes = new Map<string, Handler>([
  ['/ok', (_request, response) => sendJson(response, 200, { answer: 42 })],
  ['/empty', (_request, response) => response.writeHead(204).end()],
  ['/malformed', (_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"answer": 4')],
  ['/failed', (_request, response) => sendJson(response, 500, { error: { message: 'Traceback: boom' } })],
  ['/redirect', (_request, response) => response.writeHead(307, { location: '/ok' }).end()],
  ['/stall', () => undefined],
  ['/slow-body', (_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).write('{"partial":')],
  // Declares a large body and then sends none of it: only the declared length can refuse it in time.
  [
    '/declared-large',
    (_request, response) => response.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' }).flushHeaders(),
  ],
  [
    '/streamed-large',
    (_request, response) => {
      // Chunked, no length header: the cap has to be counted while reading.
      response.writeHead(200, { 'content-type': 'application/json' });
      for (let index = 0; index < 10; index += 1) response.write('y'.repeat(500));
      response.end();
    },
  ],
]);

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

let server: Server;
let base: string;
const hits: string[] = [];
const state = { closedConnections: 0 };

before(async () => {
  server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      hits.push(request.url ?? '');
      routes.get(request.url ?? '')?.(request, response);
    });
  });
  server.on('connection', (socket: Socket) => socket.on('close', () => (state.closedConnections += 1)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** A call to `path` with small limits; `outcomes` collects what the observer was told. */
function request(path: string, outcomes: CallOutcome[], overrides: Partial<JsonCallRequest> = {}): JsonCallRequest {
  return {
    subject: 'The test upstream',
    provider: 'test',
    url: `${base}${path}`,
    method: 'GET',
    headers: { authorization: `Bearer ${SECRET}` },
    timeoutMs: 2000,
    maxBytes: 4096,
    observer: { settled: (_provider, outcome) => outcomes.push(outcome) },
    ...overrides,
  };
}

async function failure(call: JsonCallRequest): Promise<ApiError> {
  try {
    await callJson(call);
  } catch (error) {
    assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
    assert.ok(!error.message.includes(SECRET), 'the key must never appear in an error');
    return error;
  }
  assert.fail('the call was expected to fail');
}

describe('callJson', () => {
  test('a 2xx JSON reply comes back parsed, and a non-2xx reply comes back with its status for the caller to map', async () => {
    const outcomes: CallOutcome[] = [];
    assert.deepEqual(await callJson(request('/ok', outcomes)), { status: 200, json: { answer: 42 }, malformed: false });
    const failed = await callJson(request('/failed', outcomes));
    assert.equal(failed.status, 500);
    assert.deepEqual(outcomes, ['ok', 'error']);
  });

  test('malformed JSON is flagged, while an empty body is not', async () => {
    const outcomes: CallOutcome[] = [];
    assert.deepEqual(await callJson(request('/malformed', outcomes)), { status: 200, json: undefined, malformed: true });
    assert.deepEqual(await callJson(request('/empty', outcomes)), { status: 204, json: undefined, malformed: false });
  });

  test('a stalled upstream gives upstream_timeout after the deadline and its connection is closed', async () => {
    const outcomes: CallOutcome[] = [];
    const closedBefore = state.closedConnections;
    const started = performance.now();
    const error = await failure(request('/stall', outcomes, { timeoutMs: 150 }));
    const elapsed = performance.now() - started;
    assert.equal(error.code, 'upstream_timeout');
    assert.equal(error.status, 504);
    assert.equal(error.message, 'The test upstream did not answer within 150 ms.');
    assert.ok(elapsed >= 100 && elapsed < 1500, `timed out after ${elapsed} ms`);
    assert.deepEqual(outcomes, ['timeout']);
    await waitFor(() => state.closedConnections > closedBefore);
  });

  test('the deadline also covers a body that stops halfway, and a caller may word the timeout itself', async () => {
    const outcomes: CallOutcome[] = [];
    const error = await failure(request('/slow-body', outcomes, { timeoutMs: 150, wording: { timeout: 'Too slow.' } }));
    assert.equal(error.code, 'upstream_timeout');
    assert.equal(error.message, 'Too slow.');
    assert.deepEqual(outcomes, ['timeout']);
  });

  test('a body over the cap gives upstream_error, refused on its declared length before it arrives or counted while read', async () => {
    for (const path of ['/declared-large', '/streamed-large']) {
      const outcomes: CallOutcome[] = [];
      const error = await failure(request(path, outcomes, { timeoutMs: 1000 }));
      assert.equal(error.code, 'upstream_error');
      assert.equal(error.status, 502);
      assert.equal(error.message, 'The test upstream sent a response larger than 4096 bytes.');
      assert.deepEqual(outcomes, ['error']);
    }
  });

  test('a redirect is not followed: the 3xx comes back and its target is never requested', async () => {
    const outcomes: CallOutcome[] = [];
    const before = hits.length;
    const reply = await callJson(request('/redirect', outcomes));
    assert.equal(reply.status, 307);
    assert.deepEqual(hits.slice(before), ['/redirect']);
    assert.deepEqual(outcomes, ['error']);
  });

  test('a client abort rejects with the signal reason at once and closes the upstream connection', async () => {
    const outcomes: CallOutcome[] = [];
    const closedBefore = state.closedConnections;
    const controller = new AbortController();
    const before = hits.length;
    const pending = callJson(request('/stall', outcomes, { signal: controller.signal, timeoutMs: 10_000 }));
    await waitFor(() => hits.length > before);
    const reason = new Error('client went away');
    const started = performance.now();
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    assert.ok(performance.now() - started < 500, 'the abort took effect at once');
    assert.deepEqual(outcomes, ['aborted']);
    await waitFor(() => state.closedConnections > closedBefore);

    const early = new AbortController();
    early.abort(reason);
    await assert.rejects(callJson(request('/ok', [], { signal: early.signal })), (error) => error === reason);
  });

  test('a refused connection gives upstream_error "could not be reached" and reports only the socket error code', async () => {
    const gone = createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const { port } = gone.address() as AddressInfo;
    await new Promise<void>((resolve) => gone.close(() => resolve()));
    const causes: string[] = [];
    const error = await failure(
      request('/ok', [], {
        url: `http://127.0.0.1:${port}/ok`,
        observer: { settled: (_provider, _outcome, _seconds, failure) => causes.push(failure?.reason ?? '') },
      }),
    );
    assert.equal(error.code, 'upstream_error');
    assert.equal(error.message, 'The test upstream could not be reached.');
    assert.deepEqual(causes, ['connect_ECONNREFUSED']);
  });
});
