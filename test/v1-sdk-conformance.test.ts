import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, type RecordedRequest, type ReplayUpstream, startUpstream, writeSplit } from './helpers/upstream-replay.js';

/**
 * The real clients against the real server: the official `openai` SDK, the AI SDK's
 * OpenAI-compatible provider and LangChain's ChatOpenAI, each pointed at /v1 with an API key.
 * The upstream is a loopback OpenAI-compatible server replaying recorded streams.
 */

const ADMIN = { authorization: 'Bearer admin-secret-v1' };
const GREETING = 'Bonjour ! Le café coûte 3 € — 日本語 もOK 🎉.';
const TOOL_ANSWER = 'It is 18 °C and sunny in Paris, and the local time is 14:05.';
const SSE = { 'content-type': 'text/event-stream' };

let upstream: ReplayUpstream;
let server: TestServer;
let aliceKey: string;
let timKey: string;
let seed = 100;

/** The raw (not unit-length) vectors the embeddings upstream returns for input i. */
function vectorFor(index: number): number[] {
  return [0.125 * (index + 1), -0.5, 0.25, 1.5];
}

function lastUserText(recorded: RecordedRequest): string {
  const users = (recorded.body?.messages ?? []).filter((message: any) => message.role === 'user');
  const content = users.at(-1)?.content;
  return typeof content === 'string' ? content : '';
}

async function replay(response: ServerResponse, name: string): Promise<void> {
  response.writeHead(200, SSE);
  seed += 1;
  await writeSplit(response, fixture(name), seed, 29);
  response.end();
}

function chatRequests(): RecordedRequest[] {
  return upstream.requests.filter((request) => request.url === '/v1/chat/completions');
}

async function userKey(userId: string, plan: string): Promise<string> {
  assert.equal((await server.post('/api/admin/users', { user_id: userId, plan }, ADMIN)).status, 201);
  const created = await server.post(`/api/admin/users/${userId}/keys`, '', ADMIN);
  assert.equal(created.status, 201);
  return ((await created.json()) as { key: string }).key;
}

function client(apiKey = aliceKey): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${server.url}/v1` });
}

before(async () => {
  upstream = await startUpstream(async (request, response, recorded) => {
    if (request.url === '/v1/embeddings') {
      const inputs: string[] = recorded.body.input;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          object: 'list',
          data: inputs.map((_text, index) => ({ object: 'embedding', index, embedding: vectorFor(index) })),
          model: 'text-embedding-3-small',
          usage: { prompt_tokens: 7 * inputs.length, total_tokens: 7 * inputs.length },
        }),
      );
      return;
    }
    const asked = lastUserText(recorded);
    const hasToolResults = (recorded.body.messages ?? []).some((message: any) => message.role === 'tool');
    if (hasToolResults) return replay(response, 'openai-tool-answer.sse');
    if (asked.includes('weather')) return replay(response, 'openai-tool-calls.sse');
    if (asked.includes('2+2')) return replay(response, 'openai-reasoning.sse');
    if (asked.includes('stall')) {
      // Two chunks, then silence: only the client going away ends this.
      response.writeHead(200, SSE);
      response.write(`${fixture('openai-stream.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`);
      return;
    }
    return replay(response, 'openai-stream.sse');
  });
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: 'admin-secret-v1' },
    config: {
      models: [{ id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' }],
      rag: { embeddings: { base_url: `${upstream.url}/v1`, model: 'text-embedding-3-small' } },
      plans: { free: { quota: 1000, window_seconds: 86_400 }, tiny: { quota: 1, window_seconds: 86_400 } },
      upstream: { retries: 0, idle_timeout_ms: 5000 },
    },
  });
  aliceKey = await userKey('alice', 'free');
  timKey = await userKey('tim', 'tiny');
});

after(async () => {
  await server.close();
  await upstream.close();
});

const WEATHER_TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } } },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
];

describe('the official openai SDK against /v1', () => {
  test('a non-streamed completion has the chat.completion shape, the upstream usage and our quota', async () => {
    const completion = await client().chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Say hello' }] });
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.model, 'gpt-test');
    assert.equal(completion.choices[0]?.message.content, GREETING);
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
    assert.deepEqual(completion.usage, { prompt_tokens: 21, completion_tokens: 12, total_tokens: 33 });
    assert.equal((completion as any).quota.plan, 'free');
  });

  test('a stream with include_usage ends with a usage chunk without choices; without it there is none', async () => {
    const withUsage = await client().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Say hello' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of withUsage) chunks.push(chunk);
    assert.equal(chunks[0]?.choices[0]?.delta.role, 'assistant');
    assert.equal(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), GREETING);
    const last = chunks.at(-1);
    assert.deepEqual(last?.choices, []);
    assert.deepEqual(last?.usage, { prompt_tokens: 21, completion_tokens: 12, total_tokens: 33 });
    assert.equal(chunks.at(-2)?.choices[0]?.finish_reason, 'stop');

    const plain = await client().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Say hello' }],
      stream: true,
    });
    const plainChunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of plain) plainChunks.push(chunk);
    assert.ok(plainChunks.every((chunk) => chunk.usage === undefined && chunk.choices.length === 1));
    assert.equal(plainChunks.at(-1)?.choices[0]?.finish_reason, 'stop');
  });

  test('a tool round trip: the model asks for tools, the client answers with tool messages, the model answers', async () => {
    const openai = client();
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await openai.chat.completions.create({ model: 'gpt-test', messages, tools: WEATHER_TOOLS });
    assert.equal(first.choices[0]?.finish_reason, 'tool_calls');
    const calls = first.choices[0]?.message.tool_calls ?? [];
    assert.deepEqual(
      calls.map((call) => call.type === 'function' && [call.function.name, JSON.parse(call.function.arguments)]),
      [
        ['get_weather', { location: 'Paris, France', unit: 'celsius' }],
        ['get_time', { city: 'Paris' }],
      ],
    );
    messages.push(first.choices[0]!.message);
    for (const call of calls)
      messages.push({ role: 'tool', tool_call_id: call.id, content: call.id.endsWith('aB') ? '18 °C, sunny' : '14:05' });
    const second = await openai.chat.completions.create({ model: 'gpt-test', messages, tools: WEATHER_TOOLS });
    assert.equal(second.choices[0]?.message.content, TOOL_ANSWER);
    const sent = chatRequests().at(-1)?.body.messages;
    assert.equal(sent.at(-2).role, 'tool');
    assert.equal(sent.at(-3).tool_calls.length, 2);
  });

  test('streamed tool calls assemble in the SDK’s own stream helper', async () => {
    const stream = client().chat.completions.stream({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: WEATHER_TOOLS,
    });
    const final = await stream.finalChatCompletion();
    const calls = final.choices[0]?.message.tool_calls ?? [];
    assert.deepEqual(
      calls.map((call) => call.type === 'function' && call.function.name),
      ['get_weather', 'get_time'],
    );
    assert.equal(final.choices[0]?.finish_reason, 'tool_calls');
  });

  test('reasoning arrives as reasoning_content, never mixed into content, streamed or not', async () => {
    const completion = await client().chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'What is 2+2?' }] });
    const message = completion.choices[0]?.message as any;
    assert.equal(message.content, '2 + 2 = 4.');
    assert.equal(message.reasoning_content, 'The user asks for 2+2. That is 4.');

    const stream = await client().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'What is 2+2?' }],
      stream: true,
    });
    let reasoning = '';
    let content = '';
    for await (const chunk of stream) {
      reasoning += (chunk.choices[0]?.delta as any)?.reasoning_content ?? '';
      content += chunk.choices[0]?.delta.content ?? '';
    }
    assert.equal(reasoning, 'The user asks for 2+2. That is 4.');
    assert.equal(content, '2 + 2 = 4.');
  });

  test('models.list() and models.retrieve() list the configured models', async () => {
    const ids: string[] = [];
    for await (const model of client().models.list()) ids.push(model.id);
    assert.deepEqual(ids, ['builtin-extractive', 'gpt-test']);
    const model = await client().models.retrieve('gpt-test');
    assert.equal(model.owned_by, 'openai');
    await assert.rejects(client().models.retrieve('nope'), (error: unknown) => error instanceof OpenAI.NotFoundError);
  });

  test('embeddings come back as the upstream sent them, in base64 (the SDK default) and as floats', async () => {
    const inputs = ['first text', 'second text'];
    const viaBase64 = await client().embeddings.create({ model: 'text-embedding-3-small', input: inputs });
    const asFloats = await client().embeddings.create({ model: 'text-embedding-3-small', input: inputs, encoding_format: 'float' });
    for (const result of [viaBase64, asFloats]) {
      assert.equal(result.data.length, 2);
      result.data.forEach((item, index) => {
        assert.equal(item.index, index);
        assert.deepEqual(
          Array.from(item.embedding, (value) => Math.round(value * 1000) / 1000),
          vectorFor(index),
        );
      });
      assert.deepEqual(result.usage, { prompt_tokens: 14, total_tokens: 14 });
      assert.equal(result.model, 'text-embedding-3-small');
    }
    const sent = upstream.requests.filter((request) => request.url === '/v1/embeddings').map((request) => request.body.input);
    assert.deepEqual(sent.slice(-2), [inputs, inputs]);
  });

  test('an embeddings request the contract refuses is a 400 naming the field, before any upstream call or quota', async () => {
    const before = upstream.requests.filter((request) => request.url === '/v1/embeddings').length;
    for (const [body, param] of [
      [{ input: [101, 202] }, 'input'],
      [{ input: [] }, 'input'],
      [{ input: 'hi', encoding_format: 'int8' }, 'encoding_format'],
      [{ input: 'hi', dimensions: 0 }, 'dimensions'],
    ] as const) {
      const response = await server.post('/v1/embeddings', body, { authorization: `Bearer ${aliceKey}` });
      assert.equal(response.status, 400, JSON.stringify(body));
      const error = ((await response.json()) as any).error;
      assert.equal(error.code, 'invalid_request');
      assert.equal(error.param, param);
    }
    assert.equal(upstream.requests.filter((request) => request.url === '/v1/embeddings').length, before);
  });

  test('a wrong key is a 401 AuthenticationError in OpenAI’s shape with our code', async () => {
    await assert.rejects(
      client('sk-not-a-real-key').chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.AuthenticationError);
        assert.equal(error.status, 401);
        assert.equal(error.code, 'unauthorized');
        assert.equal(error.type, 'authentication_error');
        return true;
      },
    );
  });

  test('a quota 429 is not retried by the SDK: the upstream and the quota counter see exactly one request', async () => {
    const before = chatRequests().length;
    const tim = client(timKey);
    await tim.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Say hello' }] });
    assert.equal(chatRequests().length, before + 1);
    const refusalsBefore = await refusals();
    await assert.rejects(
      tim.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'Say hello' }] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.RateLimitError);
        assert.equal(error.code, 'quota_exceeded');
        assert.equal(error.headers?.get('x-should-retry'), 'false');
        assert.ok(Number(error.headers?.get('retry-after')) > 60);
        return true;
      },
    );
    assert.equal(chatRequests().length, before + 1, 'the refused request never reached the upstream');
    assert.equal((await refusals()) - refusalsBefore, 1, 'the SDK sent the refused request once');
    const quota = (await (await server.fetch('/api/chat/quota/tim', { headers: ADMIN })).json()) as any;
    assert.equal(quota.used, 1);
    assert.equal(quota.remaining, 0);
  });

  test('aborting a stream closes the upstream request', async () => {
    const controller = new AbortController();
    const index = upstream.requests.length;
    const stream = await client().chat.completions.create(
      { model: 'gpt-test', messages: [{ role: 'user', content: 'stall please' }], stream: true },
      { signal: controller.signal },
    );
    try {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) controller.abort();
    } catch (error) {
      // The SDK may end the iteration quietly or raise its abort error; both leave the stream.
      assert.ok(error instanceof OpenAI.APIUserAbortError || (error as Error).name === 'AbortError', String(error));
    }
    const closedAt = await upstream.closed(index);
    assert.ok(closedAt > 0);
  });

  test('session_id through the extra body records the turn, read back through /api/chat/session/{id}', async () => {
    await client().chat.completions.create({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say hello' },
      ],
      // @ts-expect-error Colloquy's extension field, sent as the SDK sends any extra body field.
      session_id: 'sdk-session-1',
    });
    const session = (await (
      await server.fetch('/api/chat/session/sdk-session-1', { headers: { authorization: `Bearer ${aliceKey}` } })
    ).json()) as any;
    assert.deepEqual(
      session.messages.map((message: any) => [message.role, message.content]),
      [
        ['user', 'Say hello'],
        ['assistant', GREETING],
      ],
    );
    // An OpenAI client sends the whole conversation: the stored turns are never prepended.
    await client().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Say hello again' }],
      // @ts-expect-error as above
      session_id: 'sdk-session-1',
    });
    assert.deepEqual(
      chatRequests()
        .at(-1)
        ?.body.messages.map((message: any) => message.role),
      ['user'],
    );
  });
});

async function refusals(): Promise<number> {
  const metrics = await (await server.fetch('/metrics')).text();
  const line = metrics
    .split('\n')
    .find(
      (text) =>
        text.startsWith('colloquy_http_requests_total{') && text.includes('route="/v1/chat/completions"') && text.includes('status="429"'),
    );
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('the AI SDK (OpenAI-compatible provider) against /v1', () => {
  const provider = () => createOpenAICompatible({ name: 'colloquy', baseURL: `${server.url}/v1`, apiKey: aliceKey, includeUsage: true });

  test('generateText and streamText read the answer and the usage', async () => {
    const generated = await generateText({ model: provider()('gpt-test'), prompt: 'Say hello' });
    assert.equal(generated.text, GREETING);
    assert.equal(generated.usage.inputTokens, 21);
    assert.equal(generated.usage.outputTokens, 12);
    const streamed = streamText({ model: provider()('gpt-test'), prompt: 'Say hello' });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    assert.equal(text, GREETING);
    assert.equal((await streamed.usage).outputTokens, 12);
  });

  test('a tool loop runs the tools and ends with the model’s answer', async () => {
    const ran: string[] = [];
    const result = await generateText({
      model: provider()('gpt-test'),
      prompt: 'What is the weather in Paris?',
      tools: {
        get_weather: tool({
          inputSchema: z.object({ location: z.string(), unit: z.string() }),
          execute: async ({ location }) => {
            ran.push(`weather:${location}`);
            return '18 °C, sunny';
          },
        }),
        get_time: tool({
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            ran.push(`time:${city}`);
            return '14:05';
          },
        }),
      },
      stopWhen: stepCountIs(3),
    });
    assert.deepEqual(ran.sort(), ['time:Paris', 'weather:Paris, France']);
    assert.equal(result.text, TOOL_ANSWER);
  });

  test('reasoning reaches the AI SDK as reasoning, apart from the text', async () => {
    const generated = await generateText({ model: provider()('gpt-test'), prompt: 'What is 2+2?' });
    assert.equal(generated.text, '2 + 2 = 4.');
    assert.equal(generated.reasoningText, 'The user asks for 2+2. That is 4.');
  });
});

describe('LangChain ChatOpenAI against /v1', () => {
  const chat = () => new ChatOpenAI({ model: 'gpt-test', apiKey: aliceKey, configuration: { baseURL: `${server.url}/v1` }, maxRetries: 0 });

  test('invoke and stream read the answer', async () => {
    const message = await chat().invoke('Say hello');
    assert.equal(message.content, GREETING);
    let text = '';
    for await (const chunk of await chat().stream('Say hello')) text += chunk.content as string;
    assert.equal(text, GREETING);
  });

  test('bound tools come back as LangChain tool calls', async () => {
    const message = await chat()
      .bindTools(WEATHER_TOOLS as any)
      .invoke('What is the weather in Paris?');
    assert.deepEqual(
      message.tool_calls?.map((call) => [call.name, call.args]),
      [
        ['get_weather', { location: 'Paris, France', unit: 'celsius' }],
        ['get_time', { city: 'Paris' }],
      ],
    );
  });
});
