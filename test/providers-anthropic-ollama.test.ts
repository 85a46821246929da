import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, parseSse, startUpstream, writeSplit, type ReplayUpstream } from './helpers/upstream-replay.js';

const ANTHROPIC_KEY = 'sk-ant-test-SECRET-abcdef';
type Scenario = (response: ServerResponse) => Promise<void> | void;
const scenarios: Record<string, Scenario> = {};

let upstream: ReplayUpstream;
let server: TestServer;

function lastUserMessage(body: any): string {
  const users = (body?.messages ?? []).filter((message: any) => message.role === 'user');
  return users.at(-1)?.content ?? '';
}

before(async () => {
  // One loopback server plays both upstreams: Anthropic under /v1/messages, Ollama under /api/chat.
  upstream = await startUpstream(async (_request, response, recorded) => {
    const scenario = scenarios[lastUserMessage(recorded.body)];
    if (!scenario) {
      response.writeHead(404).end();
      return;
    }
    await scenario(response);
  });
  server = await bootServer({
    env: { TEST_ANTHROPIC_KEY: ANTHROPIC_KEY },
    config: {
      models: [
        {
          id: 'claude-test',
          provider: 'anthropic',
          base_url: upstream.url,
          api_key_env: 'TEST_ANTHROPIC_KEY',
          upstream_model: 'claude-sonnet-4-5',
          thinking_budget: 1024,
        },
        { id: 'qwen-test', provider: 'ollama', base_url: upstream.url, upstream_model: 'qwen3:8b' },
      ],
      upstream: { connect_timeout_ms: 1000, first_byte_timeout_ms: 1000, idle_timeout_ms: 300, retries: 0 },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

async function json(response: Promise<Response>): Promise<any> {
  return (await response).json();
}

describe('anthropic upstream', () => {
  test('extended thinking streams as thinking events and the text as deltas, with Anthropic usage', async () => {
    scenarios['multiply'] = async (response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      await writeSplit(response, fixture('anthropic-thinking.sse'), 11, 37);
      response.end();
    };
    const events = parseSse(
      await (
        await server.post('/api/chat/stream', {
          model: 'claude-test',
          message: 'multiply',
          deep_thinking: true,
          max_tokens: 500,
          language: 'de',
        })
      ).text(),
    );
    const thinking = events
      .filter((event) => event.event === 'thinking')
      .map((event) => event.data.text)
      .join('');
    const answer = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.equal(thinking, 'Let me work through this. 27 × 453 = 12231.');
    assert.equal(answer, '27 × 453 = **12 231** — voilà ✓');
    assert.deepEqual(events.at(-1)!.data.usage, { input_tokens: 472, output_tokens: 89 });
    assert.equal(events.at(-1)!.data.finish_reason, 'stop');

    const sent = upstream.requests.at(-1)!;
    assert.equal(sent.url, '/v1/messages');
    assert.equal(sent.headers['x-api-key'], ANTHROPIC_KEY);
    assert.equal(sent.headers['anthropic-version'], '2023-06-01');
    assert.equal(sent.body.stream, true);
    assert.deepEqual(sent.body.thinking, { type: 'enabled', budget_tokens: 1024 });
    assert.equal(sent.body.max_tokens, 1524);
    assert.match(sent.body.system, /German \(de\)/);
    assert.deepEqual(sent.body.messages, [{ role: 'user', content: 'multiply' }]);
  });

  test('without deep thinking no thinking block is requested and none reaches the reply', async () => {
    const body = await json(server.post('/api/chat/', { model: 'claude-test', message: 'multiply', temperature: 1.5 }));
    assert.equal(body.response, '27 × 453 = **12 231** — voilà ✓');
    assert.equal(body.thinking, undefined);
    const sent = upstream.requests.at(-1)!;
    assert.equal(sent.body.thinking, undefined);
    assert.equal(sent.body.max_tokens, 4096);
    assert.equal(sent.body.temperature, 1);
  });

  test('an SSE error event mid-stream becomes an error event after the text already sent', async () => {
    scenarios['overload'] = (response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(fixture('anthropic-overloaded.sse'));
    };
    const events = parseSse(await (await server.post('/api/chat/stream', { model: 'claude-test', message: 'overload' })).text());
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'delta', 'error'],
    );
    assert.deepEqual(events[2]!.data.error, {
      code: 'upstream_error',
      message: 'The anthropic upstream is overloaded; try again shortly.',
    });
  });

  test('a 529 overloaded status is a 502 upstream_error with no upstream text', async () => {
    scenarios['busy'] = (response) => {
      response
        .writeHead(529, { 'content-type': 'application/json' })
        .end('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}');
    };
    const response = await server.post('/api/chat/', { model: 'claude-test', message: 'busy' });
    assert.equal(response.status, 502);
    assert.deepEqual(await response.json(), { error: { code: 'upstream_error', message: 'The anthropic upstream failed (HTTP 529).' } });
  });
});

describe('ollama upstream', () => {
  test('NDJSON split at random offsets yields thinking and content, with Ollama token counts', async () => {
    scenarios['haiku'] = async (response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      await writeSplit(response, fixture('ollama-chat.ndjson'), 5, 17);
      response.end();
    };
    const body = await json(
      server.post('/api/chat/', { model: 'qwen-test', message: 'haiku', deep_thinking: true, temperature: 0.7, max_tokens: 80 }),
    );
    assert.equal(body.thinking, 'The user wants a haiku about rivers.');
    assert.equal(body.response, 'Água corre sob a ponte —\nrio sem pressa.');
    assert.deepEqual(body.usage, { input_tokens: 26, output_tokens: 42 });
    const sent = upstream.requests.at(-1)!;
    assert.equal(sent.url, '/api/chat');
    assert.equal(sent.body.model, 'qwen3:8b');
    assert.equal(sent.body.think, true);
    assert.equal(sent.body.stream, true);
    assert.deepEqual(sent.body.options, { temperature: 0.7, num_predict: 80 });
  });

  test('an error line mid-stream ends the NDJSON progress stream with an error line', async () => {
    scenarios['crash'] = (response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.end(fixture('ollama-error.ndjson'));
    };
    const text = await (await server.post('/api/chat/progress', { model: 'qwen-test', message: 'crash' })).text();
    const lines = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as any);
    assert.deepEqual(lines.at(-1), {
      type: 'error',
      error: { code: 'upstream_error', message: 'The ollama upstream reported an error in the middle of the reply.' },
    });
  });

  test('malformed JSON on a line is an upstream_error', async () => {
    scenarios['garbled'] = (response) => {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.end('{"message":{"content":"ok"},"done":false}\n{"message":{"content":\n');
    };
    const response = await server.post('/api/chat/', { model: 'qwen-test', message: 'garbled' });
    assert.equal(response.status, 502);
    assert.equal(((await response.json()) as any).error.message, 'The ollama upstream sent a malformed frame.');
  });

  test('an upstream that accepts but never answers is a 504 upstream_timeout after the first-byte timeout', async () => {
    scenarios['silent'] = (response) =>
      new Promise<void>((resolve) => {
        // Never writes a byte; the connection is closed by the server under test.
        response.once('close', resolve);
      });
    const started = performance.now();
    const response = await server.post('/api/chat/', { model: 'qwen-test', message: 'silent' });
    const elapsed = performance.now() - started;
    assert.equal(response.status, 504);
    assert.deepEqual(await response.json(), {
      error: { code: 'upstream_timeout', message: 'The ollama upstream did not start answering in time.' },
    });
    assert.ok(elapsed >= 900 && elapsed < 3000, `took ${elapsed} ms`);
    await upstream.closed(upstream.requests.length - 1);
  });

  test('an unreachable upstream is a 502 naming the provider and nothing else', async () => {
    const closed = await startUpstream(() => undefined);
    const url = closed.url;
    await closed.close();
    const isolated = await bootServer({
      config: { models: [{ id: 'gone', provider: 'ollama', base_url: url }], upstream: { retries: 0, connect_timeout_ms: 500 } },
    });
    try {
      const response = await isolated.post('/api/chat/', { message: 'hi' });
      assert.equal(response.status, 502);
      assert.deepEqual(await response.json(), { error: { code: 'upstream_error', message: 'The ollama upstream could not be reached.' } });
    } finally {
      await isolated.close();
    }
  });
});
