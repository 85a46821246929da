import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, startUpstream, type ReplayUpstream } from './helpers/upstream-replay.js';

const MAX_FRAME = 64 * 1024;
/** How much an endless line may send before the test gives up on the server stopping it. */
const ENDLESS_LIMIT = 64 * 1024 * 1024;

let upstream: ReplayUpstream;
let server: TestServer;
let sentByEndless = 0;
let endlessClosed: Promise<void> = Promise.resolve();

/** Writes `line` forever (until the reader goes away or the limit), never sending a newline. */
function endless(response: ServerResponse, contentType: string, opening: string): void {
  response.writeHead(200, { 'content-type': contentType });
  response.write(opening);
  sentByEndless = 0;
  endlessClosed = new Promise((resolve) => response.on('close', () => resolve()));
  const piece = 'x'.repeat(16 * 1024);
  const pump = (): void => {
    while (!response.destroyed && sentByEndless < ENDLESS_LIMIT) {
      sentByEndless += piece.length;
      if (!response.write(piece)) {
        response.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

function lastUserMessage(body: any): string {
  return (body?.messages ?? []).filter((message: any) => message.role === 'user').at(-1)?.content ?? '';
}

before(async () => {
  upstream = await startUpstream(async (_request, response, recorded) => {
    const message = lastUserMessage(recorded.body);
    if (message === 'endless sse') endless(response, 'text/event-stream', 'data: ');
    else if (message === 'endless ndjson') endless(response, 'application/x-ndjson', '{"message":{"content":"');
    else response.writeHead(404).end();
  });
  server = await bootServer({
    config: {
      models: [
        { id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' },
        { id: 'ollama-test', provider: 'ollama', base_url: upstream.url, upstream_model: 'llama3.2' },
      ],
      upstream: { connect_timeout_ms: 1000, first_byte_timeout_ms: 2000, idle_timeout_ms: 2000, retries: 0 },
      upstream_max_frame_bytes: MAX_FRAME,
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

describe('upstream frames are bounded by upstream_max_frame_bytes', () => {
  for (const [model, message] of [
    ['gpt-test', 'endless sse'],
    ['ollama-test', 'endless ndjson'],
  ] as const) {
    test(`an ${message} line that never ends is stopped past the bound: upstream_error, upstream socket closed`, async () => {
      const response = await server.post('/api/chat/', { message, model });
      assert.equal(response.status, 502);
      const body = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'upstream_error');
      assert.match(body.error.message, /frame larger than 65536 bytes/);
      await endlessClosed;
      // Bounded: the server stopped reading soon after the bound, far from what the upstream offered.
      assert.ok(sentByEndless < 16 * 1024 * 1024, `upstream managed to send ${sentByEndless} bytes`);
    });
  }

  test('on a stream the oversized frame becomes one error event and a clean end', async () => {
    const response = await server.post('/api/chat/stream', { message: 'endless sse', model: 'gpt-test' });
    const events = parseSse(await response.text());
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'error'],
    );
    assert.equal(events[1]!.data.error.code, 'upstream_error');
    await endlessClosed;
  });
});
