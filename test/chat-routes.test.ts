import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse } from './helpers/upstream-replay.js';

const SEED_FIELDS = ['response', 'model', 'plan', 'remaining', 'reset', 'timestamp'];

let server: TestServer;

before(async () => {
  server = await bootServer({
    env: { TEST_OPENAI_KEY: 'sk-never-shown-42' },
    config: {
      default_model: 'builtin-extractive',
      models: [{ id: 'remote', provider: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_env: 'TEST_OPENAI_KEY' }],
      plans: { free: { quota: 200, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
});

async function json(response: Promise<Response>): Promise<any> {
  return (await response).json();
}

function ndjson(text: string): any[] {
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
}

describe('chat routes over the builtin model', () => {
  test('concatenated SSE deltas equal the JSON response for the same input', async () => {
    for (const input of [
      { message: 'What can you do?' },
      { message: 'Tell me more', max_tokens: 7 },
      { message: 'Think first', deep_thinking: true },
    ]) {
      const body = await json(server.post('/api/chat/', input));
      const response = await server.post('/api/chat/stream', input);
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
      const events = parseSse(await response.text());
      assert.equal(events[0]!.event, 'start');
      assert.equal(events.at(-1)!.event, 'done');
      const deltas = events.filter((event) => event.event === 'delta');
      assert.ok(deltas.length > 1, 'the answer streams in several deltas');
      assert.equal(deltas.map((event) => event.data.text).join(''), body.response);
      assert.equal(events.at(-1)!.data.finish_reason, body.finish_reason);
      assert.deepEqual(events.at(-1)!.data.usage, body.usage);
      const thinking = events
        .filter((event) => event.event === 'thinking')
        .map((event) => event.data.text)
        .join('');
      assert.equal(thinking || undefined, body.thinking);
    }
  });

  test('without sources the builtin says plainly that no upstream model is configured and how to configure one', async () => {
    const body = await json(server.post('/api/chat/', { message: 'Hello?' }));
    assert.equal(body.model, 'builtin-extractive');
    assert.match(body.response, /No upstream model is configured/);
    assert.match(body.response, /OPENAI_BASE_URL/);
    assert.match(body.response, /COLLOQUY_CONFIG/);
    assert.equal(body.finish_reason, 'stop');
    assert.equal(body.thinking, undefined);
    for (const field of SEED_FIELDS) assert.ok(field in body, field);
    assert.match(body.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  test('max_tokens cuts the builtin answer with finish_reason length', async () => {
    const body = await json(server.post('/api/chat/', { message: 'Hello?', max_tokens: 3 }));
    assert.equal(body.response, 'No upstream model ');
    assert.equal(body.finish_reason, 'length');
    assert.equal(body.usage.output_tokens, 3);
  });

  test('the start event and the JSON body carry plan, remaining and reset, with RateLimit headers', async () => {
    const first = await server.post('/api/chat/', { message: 'one' });
    const firstBody = (await first.json()) as any;
    assert.equal(first.headers.get('ratelimit-limit'), '200');
    assert.equal(first.headers.get('ratelimit-remaining'), String(firstBody.remaining));
    const stream = await server.post('/api/chat/stream', { message: 'two', session_id: 'start-fields' });
    assert.equal(stream.headers.get('ratelimit-remaining'), String(firstBody.remaining - 1));
    const start = parseSse(await stream.text())[0]!;
    assert.deepEqual(start.data, {
      model: 'builtin-extractive',
      session_id: 'start-fields',
      plan: 'free',
      remaining: firstBody.remaining - 1,
      reset: firstBody.reset,
    });
  });

  test('the NDJSON progress stream walks its stages and its last line is the full result', async () => {
    const response = await server.post('/api/chat/progress', {
      message: 'progress please',
      session_id: 'ndjson-1',
      history: [{ role: 'user', content: 'earlier' }],
    });
    assert.match(response.headers.get('content-type') ?? '', /^application\/x-ndjson/);
    const lines = ndjson(await response.text());
    const stages = lines.filter((line) => line.type === 'progress').map((line) => line.stage);
    assert.deepEqual(stages, ['accepted', 'history', 'generating', 'saving']);
    for (const line of lines.filter((line) => line.type === 'progress')) {
      assert.equal(typeof line.message, 'string');
      assert.ok(Number.isInteger(line.elapsed_ms) && line.elapsed_ms >= 0);
    }
    const result = lines.at(-1);
    assert.equal(result.type, 'result');
    for (const field of SEED_FIELDS) assert.ok(field in result, field);
    assert.equal(result.session_id, 'ndjson-1');
    const same = await json(server.post('/api/chat/', { message: 'progress please', history: [{ role: 'user', content: 'earlier' }] }));
    assert.equal(result.response, same.response);
    assert.deepEqual(result.usage, same.usage);
  });

  test('with a session_id the user message and the reply are appended to the session', async () => {
    await server.post('/api/chat/', { message: 'first question', session_id: 'kept' });
    await server.post('/api/chat/stream', { message: 'second question', session_id: 'kept' }).then((response) => response.text());
    const session = await json(server.fetch('/api/chat/session/kept'));
    assert.deepEqual(
      session.messages.map((message: any) => [message.role, message.incomplete ?? false]),
      [
        ['user', false],
        ['assistant', false],
        ['user', false],
        ['assistant', false],
      ],
    );
    assert.equal(session.messages[0].content, 'first question');
    assert.equal(session.messages[2].content, 'second question');
    assert.match(session.messages[3].content, /No upstream model is configured/);
  });

  test('a request without session_id stores nothing', async () => {
    await server.post('/api/chat/', { message: 'ephemeral' });
    const response = await server.fetch('/api/chat/session/ephemeral');
    assert.equal(response.status, 404);
  });

  test('invalid requests are refused with invalid_request listing every failing field, and cost nothing', async () => {
    const before = await json(server.post('/api/chat/', { message: 'count' }));
    const response = await server.post('/api/chat/stream', {
      message: '   ',
      surprise: true,
      session_id: 'has spaces',
      temperature: 3,
      max_tokens: 0,
      rag: { top_k: 21 },
      web_search: { max_results: 11 },
      language: 'not a tag',
      history: [{ role: 'robot', content: 'x' }],
    });
    assert.equal(response.status, 400);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
    const body = (await response.json()) as any;
    assert.equal(body.error.code, 'invalid_request');
    const paths = body.error.details.map((detail: any) => detail.path).sort();
    assert.deepEqual(paths, [
      'history.0.role',
      'language',
      'max_tokens',
      'message',
      'rag.top_k',
      'session_id',
      'surprise',
      'temperature',
      'web_search.max_results',
    ]);
    assert.deepEqual(
      body.error.details.find((detail: any) => detail.path === 'surprise'),
      { path: 'surprise', message: 'is not a known field' },
    );
    const afterwards = await json(server.post('/api/chat/', { message: 'count' }));
    assert.equal(afterwards.remaining, before.remaining - 1);
  });

  test('a body without message says that message is required, in words a person understands', async () => {
    const response = await server.post('/api/chat/', { model: 'builtin-extractive' });
    assert.equal(response.status, 400);
    const body = (await response.json()) as any;
    assert.deepEqual(body.error.details, [{ path: 'message', message: 'is required' }]);
  });

  test('history longer than 100 items and a message over 32768 characters are refused', async () => {
    const history = Array.from({ length: 101 }, () => ({ role: 'user', content: 'x' }));
    const tooMany = await json(server.post('/api/chat/', { message: 'hi', history }));
    assert.deepEqual(tooMany.error.details, [{ path: 'history', message: 'must have at most 100 items' }]);
    const tooLong = await json(server.post('/api/chat/progress', { message: 'a'.repeat(32_769) }));
    assert.deepEqual(tooLong.error.details, [{ path: 'message', message: 'must be at most 32768 characters' }]);
  });

  test('an unknown model is invalid_request naming the model field; broken JSON is invalid_json', async () => {
    const unknown = await server.post('/api/chat/', { message: 'hi', model: 'gpt-99' });
    assert.equal(unknown.status, 400);
    const body = (await unknown.json()) as any;
    assert.equal(body.error.code, 'invalid_request');
    assert.equal(body.error.details[0].path, 'model');
    const broken = await server.post('/api/chat/stream', '{"message": "hi"');
    assert.equal(broken.status, 400);
    assert.equal(((await broken.json()) as any).error.code, 'invalid_json');
  });

  test('GET /api/models lists every configured model with its provider and never a key', async () => {
    const response = await server.fetch('/api/models');
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.ok(!text.includes('sk-never-shown-42'));
    const body = JSON.parse(text);
    assert.equal(body.default_model, 'builtin-extractive');
    assert.deepEqual(
      body.models.map((model: any) => [model.id, model.provider, model.default]),
      [
        ['builtin-extractive', 'builtin', true],
        ['remote', 'openai', false],
      ],
    );
  });

  test('chat metrics report time to first token and output tokens by provider', async () => {
    await server.post('/api/chat/stream', { message: 'measure me' }).then((response) => response.text());
    const text = await (await server.fetch('/metrics')).text();
    assert.match(text, /colloquy_time_to_first_token_seconds_count\{provider="builtin"\} [1-9]/);
    assert.match(text, /colloquy_output_tokens_total\{provider="builtin"\} [1-9]/);
    assert.match(text, /colloquy_active_streams 0/);
  });
});
