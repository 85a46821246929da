/**
 * The provider contract: the same assertions against every upstream dialect. A new dialect is one
 * file in src/providers/, one recorded fixture under test/fixtures/providers/ and one row below.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { ModelConfig } from '../src/config/index.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, parseSse, startUpstream, writeSplit, type ReplayUpstream } from './helpers/upstream-replay.js';
import { until } from './helpers/wait.js';

interface Dialect {
  provider: ModelConfig['provider'];
  /** A recorded reply with reasoning, an answer and usage. */
  fixture: string;
  contentType: string;
  /** Where the dialect's requests go, under the loopback base URL. */
  path: string;
  answer: string;
  thinking: string;
  usage: { input_tokens: number; output_tokens: number };
  /** The fixture cut before its terminal frame (a reply that stops early). */
  truncate(text: string): string;
  /** A frame that is valid JSON but whose fields have the wrong types. */
  wrongTypes: string;
}

const DIALECTS: Dialect[] = [
  {
    provider: 'openai',
    fixture: 'openai-reasoning.sse',
    contentType: 'text/event-stream',
    path: '/v1/chat/completions',
    answer: '2 + 2 = 4.',
    thinking: 'The user asks for 2+2. That is 4.',
    usage: { input_tokens: 9, output_tokens: 15 },
    truncate: (text) => text.slice(0, text.indexOf('"finish_reason":"stop"')).replace(/\n\n[^\n]*$/, '\n\n'),
    wrongTypes: 'data: {"choices":[{"delta":{"content":42}}]}\n\n',
  },
  {
    provider: 'anthropic',
    fixture: 'anthropic-thinking.sse',
    contentType: 'text/event-stream',
    path: '/v1/messages',
    answer: '27 × 453 = **12 231** — voilà ✓',
    thinking: 'Let me work through this. 27 × 453 = 12231.',
    usage: { input_tokens: 472, output_tokens: 89 },
    truncate: (text) => text.slice(0, text.indexOf('event: message_stop')),
    wrongTypes: 'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":["a"]}}\n\n',
  },
  {
    provider: 'ollama',
    fixture: 'ollama-chat.ndjson',
    contentType: 'application/x-ndjson',
    path: '/api/chat',
    answer: 'Água corre sob a ponte —\nrio sem pressa.',
    thinking: 'The user wants a haiku about rivers.',
    usage: { input_tokens: 26, output_tokens: 42 },
    wrongTypes: '{"message":{"content":{"nested":true}},"done":false}\n',
    truncate: (text) =>
      `${text
        .split('\n')
        .filter((line) => line.length > 0 && !line.includes('"done":true'))
        .join('\n')}\n`,
  },
];

/** What the loopback upstream does for a message: play the fixture split at a seed, or fail in a named way. */
type Behaviour = (response: ServerResponse, dialect: Dialect) => Promise<void> | void;

const behaviours: Record<string, Behaviour> = {
  'fail 500': (response) => {
    response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom sk-secret-123456"}}');
  },
  truncated: (response, dialect) => {
    response.writeHead(200, { 'content-type': dialect.contentType }).end(dialect.truncate(fixture(dialect.fixture)));
  },
  'reset after first byte': async (response, dialect) => {
    const text = fixture(dialect.fixture);
    response.writeHead(200, { 'content-type': dialect.contentType });
    response.write(text.slice(0, Math.floor(text.length * 0.8)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    response.destroy();
  },
  'wrong field types': (response, dialect) => {
    response.writeHead(200, { 'content-type': dialect.contentType }).end(dialect.wrongTypes);
  },
  'stall forever': (response, dialect) => {
    response.writeHead(200, { 'content-type': dialect.contentType });
    response.write(fixture(dialect.fixture).slice(0, 40));
  },
};

let upstream: ReplayUpstream;
let server: TestServer;

function lastUserMessage(body: any): string {
  return (body?.messages ?? []).filter((message: any) => message.role === 'user').at(-1)?.content ?? '';
}

before(async () => {
  upstream = await startUpstream(async (request, response, recorded) => {
    const dialect = DIALECTS.find((candidate) => request.url === candidate.path);
    if (!dialect) {
      response.writeHead(404).end();
      return;
    }
    const message = lastUserMessage(recorded.body);
    const seed = /^seed (\d+)$/.exec(message);
    if (seed) {
      response.writeHead(200, { 'content-type': dialect.contentType });
      await writeSplit(response, fixture(dialect.fixture), Number(seed[1]));
      response.end();
      return;
    }
    const behaviour = behaviours[message];
    if (behaviour) await behaviour(response, dialect);
    else response.writeHead(404).end();
  });
  server = await bootServer({
    env: { CONTRACT_KEY: 'sk-contract-SECRET-0123456789' },
    config: {
      models: DIALECTS.map((dialect) => ({
        id: `${dialect.provider}-contract`,
        provider: dialect.provider,
        base_url: dialect.provider === 'openai' ? `${upstream.url}/v1` : upstream.url,
        api_key_env: 'CONTRACT_KEY',
        upstream_model: 'contract-model',
      })),
      upstream: { connect_timeout_ms: 1000, first_byte_timeout_ms: 1000, idle_timeout_ms: 400, retries: 1 },
      plans: { free: { quota: 10_000, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

for (const dialect of DIALECTS) {
  const model = `${dialect.provider}-contract`;
  describe(`the ${dialect.provider} dialect keeps the provider contract`, () => {
    test('a recorded reply split at random byte offsets streams the same answer, reasoning apart, with the upstream usage', async () => {
      for (const seed of [1, 2, 3]) {
        const events = parseSse(
          await (await server.post('/api/chat/stream', { message: `seed ${seed}`, model, deep_thinking: true })).text(),
        );
        const names = events.map((event) => event.event);
        assert.equal(names[0], 'start');
        assert.equal(names.at(-1), 'done');
        const text = (name: string) =>
          events
            .filter((event) => event.event === name)
            .map((event) => event.data.text)
            .join('');
        assert.equal(text('delta'), dialect.answer, `seed ${seed}`);
        assert.equal(text('thinking'), dialect.thinking, `seed ${seed}`);
        assert.ok(names.lastIndexOf('thinking') < names.indexOf('delta'), 'reasoning comes before the answer');
        assert.deepEqual(events.at(-1)!.data.usage, dialect.usage);
        assert.equal(events.at(-1)!.data.finish_reason, 'stop');
      }
    });

    test('without deep thinking the reasoning is never shown, and never mixed into the answer', async () => {
      const response = await server.post('/api/chat/', { message: 'seed 4', model });
      assert.equal(response.status, 200);
      const body = (await response.json()) as { response: string; thinking?: string };
      assert.equal(body.response, dialect.answer);
      assert.equal(body.thinking, undefined);
    });

    test('an error before the first byte is 502 upstream_error after the retries, never echoing the upstream, and costs no quota', async () => {
      const before = (await (await server.post('/api/chat/', { message: 'seed 5', model })).json()) as { remaining: number };
      const response = await server.post('/api/chat/', { message: 'fail 500', model });
      assert.equal(response.status, 502);
      const text = await response.text();
      assert.equal(JSON.parse(text).error.code, 'upstream_error');
      assert.doesNotMatch(text, /boom|sk-/);
      assert.equal(response.headers.get('ratelimit-remaining'), String(before.remaining));
    });

    test('a reset after the first byte ends the stream with one error event after what was sent', async () => {
      const events = parseSse(
        await (await server.post('/api/chat/stream', { message: 'reset after first byte', model, deep_thinking: true })).text(),
      );
      assert.equal(events.at(-1)!.event, 'error');
      assert.equal(events.at(-1)!.data.error.code, 'upstream_error');
      assert.ok(!events.some((event) => event.event === 'done'));
    });

    test('a reply that stops before its terminal frame is an error, never a short success', async () => {
      const response = await server.post('/api/chat/', { message: 'truncated', model });
      assert.equal(response.status, 502);
      assert.match(((await response.json()) as { error: { message: string } }).error.message, /ended the reply before finishing it/);
    });

    test('a frame whose fields have the wrong types is a malformed frame, never trusted', async () => {
      const response = await server.post('/api/chat/', { message: 'wrong field types', model });
      assert.equal(response.status, 502);
      assert.match(((await response.json()) as { error: { message: string } }).error.message, /malformed frame/);
    });

    test('an upstream that stalls mid-reply is 504 upstream_timeout after idle_timeout_ms', async () => {
      const response = await server.post('/api/chat/', { message: 'stall forever', model });
      assert.equal(response.status, 504);
      assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'upstream_timeout');
    });

    test('a client that leaves closes the upstream request at once', async () => {
      // Counted before sending: the stream's start can reach the client before the upstream has the call.
      const index = upstream.requests.length;
      const controller = new AbortController();
      const response = await fetch(`${server.url}/api/chat/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'stall forever', model }),
        signal: controller.signal,
      });
      assert.equal(response.status, 200);
      assert.ok(await until(() => upstream.requests.length > index, 5000), 'the upstream received the call');
      const aborted = performance.now();
      controller.abort();
      const closedAt = await upstream.closed(index);
      assert.ok(closedAt - aborted < 300, `upstream closed ${Math.round(closedAt - aborted)} ms after the client left`);
    });
  });
}
