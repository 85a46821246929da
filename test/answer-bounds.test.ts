import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, startUpstream, type ReplayUpstream } from './helpers/upstream-replay.js';

let upstream: ReplayUpstream;
let server: TestServer;
let sentChunks = 0;

before(async () => {
  // An upstream that ignores max_tokens and never stops answering.
  upstream = await startUpstream((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    const piece = `data: ${JSON.stringify({ choices: [{ delta: { content: 'endless words here ' } }] })}\n\n`;
    const pump = (): void => {
      while (!response.destroyed && sentChunks < 2_000_000) {
        sentChunks += 1;
        if (!response.write(piece)) {
          response.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  server = await bootServer({
    config: {
      models: [{ id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' }],
      max_answer_bytes: 64 * 1024,
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

describe('answers are bounded, whatever the upstream does', () => {
  test('an endless answer into a JSON reply stops at max_answer_bytes: 200 with finish_reason length, upstream closed, never 500', async () => {
    const response = await server.post('/api/chat/', { message: 'go on forever', model: 'gpt-test', session_id: 'bounded' });
    assert.equal(response.status, 200);
    const body = (await response.json()) as { response: string; finish_reason: string };
    assert.equal(body.finish_reason, 'length');
    assert.ok(body.response.length <= 64 * 1024 && body.response.length > 60 * 1024, `kept ${body.response.length} bytes`);
    await upstream.closed(upstream.requests.length - 1);
    const session = (await (await server.fetch('/api/chat/session/bounded')).json()) as { messages: Array<{ incomplete?: boolean }> };
    assert.equal(session.messages[1]?.incomplete, true, 'the cut turn is stored marked incomplete');
  });

  test('an upstream that ignores max_tokens is cut near it, on streams too', async () => {
    const events = parseSse(
      await (await server.post('/api/chat/stream', { message: 'ignore the limit', model: 'gpt-test', max_tokens: 50 })).text(),
    );
    assert.equal(events.at(-1)?.event, 'done');
    assert.equal(events.at(-1)?.data.finish_reason, 'length');
    const text = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    // Cut once the estimate (characters / 4) passes twice the limit: bounded, never endless.
    assert.ok(text.length <= 50 * 4 * 2 && text.length > 100, `kept ${text.length} characters`);
    await upstream.closed(upstream.requests.length - 1);
  });
});
