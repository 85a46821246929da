import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, type RecordedRequest, type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';

/** /v1 over plain HTTP: what clients send that OpenAI accepts, what we refuse and how, and our extension fields. */

const ADMIN = { authorization: 'Bearer admin-secret-surface' };
const PIXEL = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

let upstream: ReplayUpstream;
let server: TestServer;

function lastUserText(recorded: RecordedRequest): string {
  const users = (recorded.body?.messages ?? []).filter((message: any) => message.role === 'user');
  const content = users.at(-1)?.content;
  return typeof content === 'string' ? content : JSON.stringify(content);
}

before(async () => {
  upstream = await startUpstream(async (request, response, recorded) => {
    if (request.url === '/api/chat') {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.end(fixture('ollama-chat.ndjson'));
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    const frames = fixture('openai-stream.sse').split('\n\n');
    if (lastUserText(recorded).includes('fail midway')) {
      response.end(`${frames.slice(0, 3).join('\n\n')}\n\ndata: {"error":{"message":"the model crashed","type":"server_error"}}\n\n`);
      return;
    }
    response.end(frames.join('\n\n'));
  });
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-secret-surface' },
    config: {
      models: [
        { id: 'plain-gpt', provider: 'openai', base_url: `${upstream.url}/v1` },
        { id: 'vision-gpt', provider: 'openai', base_url: `${upstream.url}/v1`, vision: true },
        { id: 'vision-llama', provider: 'ollama', base_url: upstream.url, vision: true },
      ],
      default_model: 'plain-gpt',
      upstream: { retries: 0, idle_timeout_ms: 2000 },
      plans: { free: { quota: 1000, window_seconds: 86_400 } },
    },
  });
  const added = await server.post(
    '/api/rag/documents',
    { title: 'Tea guide', text: 'Green tea is brewed at 80 degrees for two minutes. Black tea takes boiling water.' },
    ADMIN,
  );
  assert.equal(added.status, 201);
});

after(async () => {
  await server.close();
  await upstream.close();
});

const lastUpstream = () => upstream.requests.at(-1)?.body;

describe('/v1/chat/completions over HTTP', () => {
  test('unknown fields are ignored at the top level and inside messages; developer is a system role', async () => {
    const response = await server.post('/v1/chat/completions', {
      model: 'plain-gpt',
      messages: [
        { role: 'developer', content: 'Be brief.', name: 'ops' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Say' },
            { type: 'text', text: 'hello' },
          ],
          name: 'ana',
          cache_control: {},
        },
      ],
      logit_bias: { 50256: -100 },
      metadata: { app: 'x' },
      store: false,
      service_tier: 'auto',
      frequency_penalty: 0,
      max_completion_tokens: 100,
      stop: 'END',
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/json');
    assert.match(response.headers.get('x-request-id') ?? '', /^req_[0-9a-z]+$/);
    assert.equal(response.headers.get('ratelimit-limit'), '1000');
    const sent = lastUpstream();
    assert.deepEqual(sent.messages, [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Say\nhello' },
    ]);
    assert.equal(sent.max_tokens, 100);
    assert.deepEqual(sent.stop, ['END']);
  });

  test('an assistant turn that carries tool calls may have null or empty content', async () => {
    for (const content of [null, '']) {
      const response = await server.post('/v1/chat/completions', {
        messages: [
          { role: 'user', content: 'weather?' },
          {
            role: 'assistant',
            content,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
      });
      assert.equal(response.status, 200, `content ${JSON.stringify(content)}`);
    }
  });

  test('n other than 1, a bad role and a wrong type are 400s in OpenAI’s error shape naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ messages: [{ role: 'user', content: 'hi' }], n: 2 }, 'n'],
      [{ messages: [{ role: 'function', content: 'hi' }] }, 'messages.0.role'],
      [{ messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' }, 'temperature'],
      [{ messages: [] }, 'messages'],
      [
        { messages: [{ role: 'user', content: 'hi' }], tool_choice: { type: 'function', function: { name: 'nope' } } },
        'tool_choice.function.name',
      ],
      [{ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] }, 'messages.0.content'],
      [{ messages: [{ role: 'tool', content: 'result' }] }, 'messages.0.tool_call_id'],
    ];
    for (const [body, param] of cases) {
      const response = await server.post('/v1/chat/completions', body);
      assert.equal(response.status, 400, JSON.stringify(body));
      const error = ((await response.json()) as any).error;
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.code, 'invalid_request');
      assert.equal(error.param, param);
      assert.ok(error.message.includes(param), error.message);
    }
  });

  test('image parts go to a vision model as image_url parts, and are refused for a model without vision', async () => {
    const parts = [
      { type: 'text', text: 'What is this?' },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } },
    ];
    const refused = await server.post('/v1/chat/completions', { model: 'plain-gpt', messages: [{ role: 'user', content: parts }] });
    assert.equal(refused.status, 400);
    assert.match(((await refused.json()) as any).error.message, /does not take image input/);
    const before = upstream.requests.length;
    assert.equal(upstream.requests.length, before);

    const accepted = await server.post('/v1/chat/completions', { model: 'vision-gpt', messages: [{ role: 'user', content: parts }] });
    assert.equal(accepted.status, 200);
    assert.deepEqual(lastUpstream().messages, [{ role: 'user', content: parts }]);
  });

  test('Ollama takes images as base64 only: a link is a clear 400, a data: URL goes as images', async () => {
    const link = await server.post('/v1/chat/completions', {
      model: 'vision-llama',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }],
    });
    assert.equal(link.status, 400);
    assert.match(((await link.json()) as any).error.message, /only as data: URLs/);
    const inline = await server.post('/v1/chat/completions', {
      model: 'vision-llama',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: PIXEL } },
          ],
        },
      ],
    });
    assert.equal(inline.status, 200);
    assert.deepEqual(lastUpstream().messages, [{ role: 'user', content: 'What is this?', images: [PIXEL.split(',')[1]] }]);
  });

  test('/v1 has its own body limit (8 MiB): a 2 MiB conversation passes there and is 413 on /api', async () => {
    const long = 'a'.repeat(2 * 1024 * 1024);
    const v1 = await server.post('/v1/chat/completions', { messages: [{ role: 'user', content: `${long} hi` }] });
    assert.equal(v1.status, 200);
    const api = await server.post('/api/chat', { message: long });
    assert.equal(api.status, 413);
    assert.equal(((await api.json()) as any).error.code, 'payload_too_large');
    const huge = await server.post('/v1/chat/completions', { messages: [{ role: 'user', content: 'a'.repeat(9 * 1024 * 1024) }] });
    assert.equal(huge.status, 413);
    assert.deepEqual(Object.keys(((await huge.json()) as any).error).sort(), ['code', 'message', 'param', 'type']);
  });

  test('errors anywhere under /v1 use OpenAI’s shape; /api keeps its own', async () => {
    const v1 = (await (await server.fetch('/v1/nothing-here')).json()) as any;
    assert.deepEqual(Object.keys(v1.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(v1.error.code, 'not_found');
    const api = (await (await server.fetch('/api/nothing-here')).json()) as any;
    assert.deepEqual(Object.keys(api.error).sort(), ['code', 'message']);
    const method = await server.fetch('/v1/chat/completions');
    assert.equal(method.status, 405);
    assert.equal(((await method.json()) as any).error.type, 'invalid_request_error');
  });

  test('a failure after the stream started is one data: {"error"} event, then the stream ends without [DONE]', async () => {
    const response = await server.post('/v1/chat/completions', { messages: [{ role: 'user', content: 'fail midway' }], stream: true });
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.doesNotMatch(text, /^event:/m, 'no named events: the SDK would read them as chunks');
    const frames = text.split('\n\n').filter((frame) => frame.startsWith('data: '));
    const last = JSON.parse(frames.at(-1)!.slice(6));
    assert.equal(last.error.code, 'upstream_error');
    assert.equal(last.error.type, 'upstream_error');
    assert.ok(!text.includes('[DONE]'));
    assert.ok(frames.some((frame) => frame.includes('"content":"Bonjour"')));
  });

  test('rag, web_search and session_id ride in the body; sources and quota come back beside the choices', async () => {
    const body = (await (
      await server.post('/v1/chat/completions', {
        model: 'builtin-extractive',
        messages: [{ role: 'user', content: 'At what temperature is green tea brewed?' }],
        rag: true,
      })
    ).json()) as any;
    assert.match(body.choices[0].message.content, /brewed at 80 degrees for two minutes\. \[1\]/);
    assert.equal(body.sources[0].title, 'Tea guide');
    assert.deepEqual(Object.keys(body.quota).sort(), ['plan', 'remaining', 'reset']);

    const stream = await (
      await server.post('/v1/chat/completions', {
        model: 'builtin-extractive',
        messages: [{ role: 'user', content: 'At what temperature is green tea brewed?' }],
        rag: { top_k: 2 },
        stream: true,
      })
    ).text();
    const chunks = stream
      .split('\n\n')
      .filter((frame) => frame.startsWith('data: {'))
      .map((frame) => JSON.parse(frame.slice(6)));
    const final = chunks.find((chunk) => chunk.choices[0]?.finish_reason);
    assert.equal(final.sources[0].title, 'Tea guide');
    assert.equal(typeof final.quota.remaining, 'number');

    const invalid = await server.post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'hi' }],
      session_id: 'no spaces allowed',
    });
    assert.equal(invalid.status, 400);
    assert.equal(((await invalid.json()) as any).error.param, 'session_id');
  });

  test('reasoning_effort turns on deep thinking: the built-in model’s reasoning comes back as reasoning_content', async () => {
    const body = (await (
      await server.post('/v1/chat/completions', {
        model: 'builtin-extractive',
        messages: [{ role: 'user', content: 'hello' }],
        reasoning_effort: 'high',
      })
    ).json()) as any;
    assert.match(body.choices[0].message.reasoning_content, /no upstream model is configured/);
    assert.ok(!body.choices[0].message.content.includes(body.choices[0].message.reasoning_content));
  });
});

describe('/v1/embeddings without an embeddings upstream', () => {
  test('is a 404 in OpenAI’s shape naming the config key', async () => {
    const response = await server.post('/v1/embeddings', { model: 'text-embedding-3-small', input: 'hello' });
    assert.equal(response.status, 404);
    const error = ((await response.json()) as any).error;
    assert.equal(error.code, 'not_found');
    assert.match(error.message, /rag\.embeddings/);
  });
});
