import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, startUpstream, writeSplit, type RecordedRequest, type ReplayUpstream } from './helpers/upstream-replay.js';

/**
 * Tool calling through /v1/chat/completions on each upstream dialect: tool definitions reach the
 * upstream in its own shape, its recorded tool-call stream (split at random byte offsets) comes
 * back as OpenAI tool_calls, and the client's tool results are translated back on the next turn.
 */

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The current weather in a city',
      parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } }, required: ['location'] },
    },
  },
  {
    type: 'function',
    function: { name: 'get_time', description: 'The local time', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
];

const ASKED = [{ role: 'user', content: 'What is the weather and the time in Paris?' }];

/** What each dialect's recorded stream asks for, in OpenAI's terms. */
const EXPECTED_CALLS: Record<string, Array<{ id: string | RegExp; name: string; arguments: unknown }>> = {
  openai: [
    { id: 'call_Wx9kq2LmT0aB', name: 'get_weather', arguments: { location: 'Paris, France', unit: 'celsius' } },
    { id: 'call_Q7rT1nVb3sKe', name: 'get_time', arguments: { city: 'Paris' } },
  ],
  anthropic: [
    { id: 'toolu_01A09q90qw90lq917835lq9', name: 'get_weather', arguments: { location: 'Paris, France', unit: 'celsius' } },
    { id: 'toolu_01B7nq2Xy3KtRfA9mCq4wD8e', name: 'get_time', arguments: {} },
  ],
  ollama: [
    { id: /^call_[0-9a-f]{24}$/, name: 'get_weather', arguments: { location: 'Paris, France', unit: 'celsius' } },
    { id: 'call_k2n4', name: 'get_time', arguments: { city: 'Paris' } },
  ],
};

const ANTHROPIC_ANSWER = [
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":610,"output_tokens":1}}}',
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18 °C in Paris."}}',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}',
  'event: message_stop\ndata: {"type":"message_stop"}',
  '',
].join('\n\n');

const OLLAMA_ANSWER = [
  '{"model":"qwen3:8b","created_at":"2025-11-20T10:00:01Z","message":{"role":"assistant","content":"It is 18 °C in Paris."},"done":false}',
  '{"model":"qwen3:8b","created_at":"2025-11-20T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":230,"eval_count":9}',
  '',
].join('\n');

let upstream: ReplayUpstream;
let server: TestServer;
let seed = 1;

/** Whether the upstream request already carries tool results (the second turn). */
function hasToolResults(recorded: RecordedRequest): boolean {
  return JSON.stringify(recorded.body?.messages ?? []).includes('18 °C, sunny');
}

async function reply(response: ServerResponse, contentType: string, text: string): Promise<void> {
  response.writeHead(200, { 'content-type': contentType });
  seed += 1;
  await writeSplit(response, text, seed, 17);
  response.end();
}

before(async () => {
  // One loopback server plays all three dialects, each under its own path.
  upstream = await startUpstream(async (request, response, recorded) => {
    const second = hasToolResults(recorded);
    if (JSON.stringify(recorded.body?.messages ?? []).includes('Think first')) {
      // Each dialect's recorded reasoning stream.
      if (request.url === '/v1/chat/completions') return reply(response, 'text/event-stream', fixture('openai-reasoning.sse'));
      if (request.url === '/v1/messages') return reply(response, 'text/event-stream', fixture('anthropic-thinking.sse'));
      return reply(response, 'application/x-ndjson', fixture('ollama-chat.ndjson'));
    }
    if (request.url === '/v1/chat/completions') {
      await reply(response, 'text/event-stream', fixture(second ? 'openai-tool-answer.sse' : 'openai-tool-calls.sse'));
    } else if (request.url === '/v1/messages') {
      await reply(response, 'text/event-stream', second ? ANTHROPIC_ANSWER : fixture('anthropic-tool-use.sse'));
    } else if (request.url === '/api/chat') {
      await reply(response, 'application/x-ndjson', second ? OLLAMA_ANSWER : fixture('ollama-tool-calls.ndjson'));
    } else {
      response.writeHead(404).end();
    }
  });
  server = await bootServer({
    config: {
      models: [
        { id: 'openai-tools', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' },
        { id: 'claude-tools', provider: 'anthropic', base_url: upstream.url, upstream_model: 'claude-sonnet-4-5' },
        { id: 'ollama-tools', provider: 'ollama', base_url: upstream.url, upstream_model: 'qwen3:8b' },
      ],
      upstream: { retries: 0, idle_timeout_ms: 2000 },
      plans: { free: { quota: 1000, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

const MODELS = { openai: 'openai-tools', anthropic: 'claude-tools', ollama: 'ollama-tools' } as const;

function assertCalls(dialect: keyof typeof MODELS, calls: any[]): void {
  const expected = EXPECTED_CALLS[dialect]!;
  assert.equal(calls.length, expected.length, JSON.stringify(calls));
  calls.forEach((call, index) => {
    const wanted = expected[index]!;
    assert.equal(call.type, 'function');
    if (typeof wanted.id === 'string') assert.equal(call.id, wanted.id);
    else assert.match(call.id, wanted.id);
    assert.equal(call.function.name, wanted.name);
    assert.deepEqual(JSON.parse(call.function.arguments), wanted.arguments);
  });
}

/** Reads an SSE body of chat.completion.chunk events into its chunks (without [DONE]). */
function chunksOf(text: string): any[] {
  assert.ok(text.trimEnd().endsWith('data: [DONE]'), 'the stream ends with [DONE]');
  return text
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: ') && frame !== 'data: [DONE]')
    .map((frame) => JSON.parse(frame.slice(6)));
}

/** Assembles streamed tool-call fragments the way the OpenAI SDK does. */
function assembleToolCalls(chunks: any[]): any[] {
  const calls: any[] = [];
  for (const chunk of chunks) {
    for (const fragment of chunk.choices[0]?.delta?.tool_calls ?? []) {
      const call = calls[fragment.index];
      if (!call) {
        // The first fragment of each call carries index, id, type and the function's name.
        assert.equal(typeof fragment.id, 'string');
        assert.equal(fragment.type, 'function');
        assert.equal(typeof fragment.function.name, 'string');
        calls[fragment.index] = {
          id: fragment.id,
          type: 'function',
          function: { name: fragment.function.name, arguments: fragment.function.arguments ?? '' },
        };
      } else {
        assert.equal(fragment.id, undefined, 'later fragments carry only arguments');
        call.function.arguments += fragment.function.arguments ?? '';
      }
    }
  }
  return calls;
}

function lastRequest(path: string): RecordedRequest {
  const found = upstream.requests.filter((request) => request.url === path).at(-1);
  assert.ok(found, `the upstream received a request at ${path}`);
  return found;
}

describe('tool calling through /v1 on every upstream dialect', () => {
  for (const dialect of ['openai', 'anthropic', 'ollama'] as const) {
    test(`${dialect}: tool calls come back as OpenAI tool_calls with finish_reason "tool_calls"`, async () => {
      const response = await server.post('/v1/chat/completions', {
        model: MODELS[dialect],
        messages: ASKED,
        tools: TOOLS,
        tool_choice: 'auto',
      });
      assert.equal(response.status, 200);
      const body = (await response.json()) as any;
      assert.equal(body.choices[0].finish_reason, 'tool_calls');
      assertCalls(dialect, body.choices[0].message.tool_calls);
      if (dialect === 'anthropic') assert.equal(body.choices[0].message.content, 'Let me check the weather in Paris.');
      else assert.equal(body.choices[0].message.content, null);
    });

    test(`${dialect}: streamed tool calls arrive as indexed fragments, whatever the byte split`, async () => {
      for (let round = 0; round < 4; round += 1) {
        const response = await server.post('/v1/chat/completions', { model: MODELS[dialect], messages: ASKED, tools: TOOLS, stream: true });
        assert.equal(response.status, 200);
        const chunks = chunksOf(await response.text());
        assertCalls(dialect, assembleToolCalls(chunks));
        const finish = chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean);
        assert.deepEqual(finish, ['tool_calls']);
      }
    });
  }

  test('openai: tools, tool choice and the tool round trip reach the upstream exactly as OpenAI defines them', async () => {
    const first = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.openai,
        messages: ASKED,
        tools: TOOLS,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
      })
    ).json()) as any;
    const sent = lastRequest('/v1/chat/completions').body;
    assert.deepEqual(sent.tools, TOOLS);
    assert.deepEqual(sent.tool_choice, { type: 'function', function: { name: 'get_weather' } });
    assert.equal(sent.parallel_tool_calls, false);

    const calls = first.choices[0].message.tool_calls;
    const second = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.openai,
        tools: TOOLS,
        messages: [
          ...ASKED,
          { role: 'assistant', content: null, tool_calls: calls },
          { role: 'tool', tool_call_id: calls[0].id, content: '18 °C, sunny' },
          { role: 'tool', tool_call_id: calls[1].id, content: '14:05' },
        ],
      })
    ).json()) as any;
    assert.equal(second.choices[0].message.content, 'It is 18 °C and sunny in Paris, and the local time is 14:05.');
    assert.equal(second.choices[0].finish_reason, 'stop');
    const messages = lastRequest('/v1/chat/completions').body.messages;
    assert.deepEqual(messages.slice(1), [
      { role: 'assistant', content: null, tool_calls: calls },
      { role: 'tool', tool_call_id: calls[0].id, content: '18 °C, sunny' },
      { role: 'tool', tool_call_id: calls[1].id, content: '14:05' },
    ]);
  });

  test('anthropic: tools become input_schema tools, tool calls tool_use blocks and results tool_result blocks in one user turn', async () => {
    const first = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.anthropic,
        messages: [{ role: 'system', content: 'Be brief.' }, ...ASKED],
        tools: TOOLS,
        tool_choice: 'required',
        parallel_tool_calls: false,
        stop: 'END',
      })
    ).json()) as any;
    const sent = lastRequest('/v1/messages').body;
    assert.equal(sent.system, 'Be brief.');
    assert.deepEqual(sent.tools, [
      { name: 'get_weather', description: 'The current weather in a city', input_schema: TOOLS[0]!.function.parameters },
      { name: 'get_time', description: 'The local time', input_schema: TOOLS[1]!.function.parameters },
    ]);
    assert.deepEqual(sent.tool_choice, { type: 'any', disable_parallel_tool_use: true });
    assert.deepEqual(sent.stop_sequences, ['END']);

    const calls = first.choices[0].message.tool_calls;
    const second = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.anthropic,
        tools: TOOLS,
        messages: [
          ...ASKED,
          { role: 'assistant', content: 'Let me check the weather in Paris.', tool_calls: calls },
          { role: 'tool', tool_call_id: calls[0].id, content: '18 °C, sunny' },
          { role: 'tool', tool_call_id: calls[1].id, content: '14:05' },
        ],
      })
    ).json()) as any;
    assert.equal(second.choices[0].message.content, 'It is 18 °C in Paris.');
    assert.deepEqual(lastRequest('/v1/messages').body.messages, [
      { role: 'user', content: ASKED[0]!.content },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me check the weather in Paris.' },
          { type: 'tool_use', id: calls[0].id, name: 'get_weather', input: { location: 'Paris, France', unit: 'celsius' } },
          { type: 'tool_use', id: calls[1].id, name: 'get_time', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: calls[0].id, content: '18 °C, sunny' },
          { type: 'tool_result', tool_use_id: calls[1].id, content: '14:05' },
        ],
      },
    ]);
  });

  test('ollama: tools go as Ollama tools, calls come back with ids, and results go back named after their tool', async () => {
    const first = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.ollama,
        messages: ASKED,
        tools: TOOLS,
        seed: 7,
        top_p: 0.5,
        response_format: { type: 'json_object' },
      })
    ).json()) as any;
    const sent = lastRequest('/api/chat').body;
    assert.deepEqual(sent.tools, TOOLS);
    assert.equal(sent.format, 'json');
    assert.deepEqual(sent.options, { seed: 7, top_p: 0.5 });

    const calls = first.choices[0].message.tool_calls;
    const second = (await (
      await server.post('/v1/chat/completions', {
        model: MODELS.ollama,
        tools: TOOLS,
        messages: [
          ...ASKED,
          { role: 'assistant', content: '', tool_calls: calls },
          { role: 'tool', tool_call_id: calls[0].id, content: '18 °C, sunny' },
          { role: 'tool', tool_call_id: calls[1].id, content: '14:05' },
        ],
      })
    ).json()) as any;
    assert.equal(second.choices[0].message.content, 'It is 18 °C in Paris.');
    assert.deepEqual(lastRequest('/api/chat').body.messages.slice(1), [
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { function: { name: 'get_weather', arguments: { location: 'Paris, France', unit: 'celsius' } } },
          { function: { name: 'get_time', arguments: { city: 'Paris' } } },
        ],
      },
      { role: 'tool', content: '18 °C, sunny', tool_name: 'get_weather' },
      { role: 'tool', content: '14:05', tool_name: 'get_time' },
    ]);
  });

  test('tool_choice "none" on Ollama, which has no tool choice, offers no tools at all', async () => {
    await server.post('/v1/chat/completions', { model: MODELS.ollama, messages: ASKED, tools: TOOLS, tool_choice: 'none' });
    assert.equal(lastRequest('/api/chat').body.tools, undefined);
  });

  const REASONING = {
    openai: ['The user asks for 2+2. That is 4.', '2 + 2 = 4.'],
    anthropic: ['Let me work through this. 27 × 453 = 12231.', '27 × 453 = **12 231** — voilà ✓'],
    ollama: ['The user wants a haiku about rivers.', 'Água corre sob a ponte —\nrio sem pressa.'],
  } as const;
  for (const dialect of ['openai', 'anthropic', 'ollama'] as const) {
    test(`${dialect}: reasoning comes back as reasoning_content, never inside content, streamed or not`, async () => {
      const [reasoning, content] = REASONING[dialect];
      const messages = [{ role: 'user', content: 'Think first, then answer.' }];
      const body = (await (await server.post('/v1/chat/completions', { model: MODELS[dialect], messages })).json()) as any;
      assert.equal(body.choices[0].message.reasoning_content, reasoning);
      assert.equal(body.choices[0].message.content, content);
      const chunks = chunksOf(await (await server.post('/v1/chat/completions', { model: MODELS[dialect], messages, stream: true })).text());
      assert.equal(chunks.map((chunk) => chunk.choices[0]?.delta?.reasoning_content ?? '').join(''), reasoning);
      assert.equal(chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join(''), content);
    });
  }

  test('the built-in model never calls a tool and says so in its text', async () => {
    const body = (await (
      await server.post('/v1/chat/completions', { model: 'builtin-extractive', messages: ASKED, tools: TOOLS })
    ).json()) as any;
    assert.equal(body.choices[0].finish_reason, 'stop');
    assert.equal(body.choices[0].message.tool_calls, undefined);
    assert.match(
      body.choices[0].message.content,
      /^The built-in offline model \(builtin-extractive\) cannot call tools, so get_weather, get_time were not called\./,
    );
  });
});
