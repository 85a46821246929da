import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, parseSse, startUpstream, type ReplayUpstream } from './helpers/upstream-replay.js';
import { until } from './helpers/wait.js';

type Scenario = (response: ServerResponse) => Promise<void> | void;
const scenarios: Record<string, Scenario> = {};
const FRAMES = fixture('openai-stream.sse').split('\n\n');
const SSE_HEADERS = { 'content-type': 'text/event-stream' };

let upstream: ReplayUpstream;
let server: TestServer;

before(async () => {
  upstream = await startUpstream(async (_request, response, recorded) => {
    const users = (recorded.body?.messages ?? []).filter((message: any) => message.role === 'user');
    const scenario = scenarios[users.at(-1)?.content ?? ''] ?? scenarios['default'];
    await scenario!(response);
  });
  scenarios['default'] = (response) => {
    response.writeHead(200, SSE_HEADERS);
    response.end(FRAMES.join('\n\n'));
  };
  server = await bootServer({
    config: {
      models: [{ id: 'remote', provider: 'openai', base_url: `${upstream.url}/v1` }],
      upstream: { retries: 0, idle_timeout_ms: 2000 },
      plans: { free: { quota: 100, window_seconds: 86_400 } },
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

async function session(id: string): Promise<any> {
  return json(server.fetch(`/api/chat/session/${id}`));
}

/** How many chats through the OpenAI upstream have produced their first delta. */
async function firstTokens(): Promise<number> {
  const text = await (await server.fetch('/metrics')).text();
  return Number(/^colloquy_time_to_first_token_seconds_count\{provider="openai"\} (\d+)/m.exec(text)?.[1] ?? '0');
}

function hold(response: ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    response.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe('sessions and partial replies', () => {
  test('stored turns come before history and the new message, after the system prompt', async () => {
    await json(server.post('/api/chat/', { message: 'my name is Ada', session_id: 'order' }));
    await json(
      server.post('/api/chat/', {
        message: 'what is my name?',
        session_id: 'order',
        system: 'You are terse.',
        history: [{ role: 'assistant', content: 'noted' }],
      }),
    );
    const sent = upstream.requests.at(-1)!.body.messages;
    assert.deepEqual(sent, [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'my name is Ada' },
      { role: 'assistant', content: 'Bonjour ! Le café coûte 3 € — 日本語 もOK 🎉.' },
      { role: 'assistant', content: 'noted' },
      { role: 'user', content: 'what is my name?' },
    ]);
    assert.equal((await session('order')).message_count, 4);
  });

  test('a client that leaves mid-reply leaves the partial answer stored, marked incomplete', async () => {
    scenarios['leave'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${FRAMES.slice(0, 3).join('\n\n')}\n\n`);
      await hold(response, 3000);
      if (!response.destroyed) response.end();
    };
    const response = await server.post('/api/chat/stream', { model: 'remote', message: 'leave', session_id: 'left' });
    const reader = response.body!.getReader();
    let seen = '';
    while ((seen.match(/event: delta/g) ?? []).length < 2) seen += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    await upstream.closed(upstream.requests.length - 1);
    let stored: any;
    for (let tries = 0; tries < 50; tries++) {
      stored = await session('left');
      if (stored.messages) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(
      stored.messages.map((message: any) => ({ role: message.role, content: message.content, incomplete: message.incomplete ?? false })),
      [
        { role: 'user', content: 'leave', incomplete: false },
        { role: 'assistant', content: 'Bonjour ! Le café', incomplete: true },
      ],
    );
  });

  test('a client that leaves the JSON route mid-reply closes the upstream at once and keeps the partial turn', async () => {
    let written!: () => void;
    const wrote = new Promise<void>((resolve) => (written = resolve));
    scenarios['json-leave'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${FRAMES.slice(0, 2).join('\n\n')}\n\n`);
      written();
      await hold(response, 3000);
      if (!response.destroyed) response.end();
    };
    const tokensBefore = await firstTokens();
    const controller = new AbortController();
    const request = fetch(`${server.url}/api/chat/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'json-leave', session_id: 'json-left' }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await wrote;
    // The client leaves once the server has read the first delta (its time to first token is recorded).
    assert.ok(await until(async () => (await firstTokens()) > tokensBefore, 5000), 'the first delta was read');
    const abortedAt = performance.now();
    controller.abort();
    await request;
    const closedAt = await upstream.closed(upstream.requests.length - 1);
    assert.ok(closedAt - abortedAt < 1000, `upstream closed after ${closedAt - abortedAt} ms`);
    let stored: any;
    for (let tries = 0; tries < 50 && !stored?.messages; tries++) {
      stored = await session('json-left');
      if (!stored.messages) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.deepEqual(
      stored.messages.map((message: any) => [message.role, message.content, message.incomplete ?? false]),
      [
        ['user', 'json-leave', false],
        ['assistant', 'Bonjour', true],
      ],
    );
  });

  test('an upstream failure after some output stores the partial answer marked incomplete and keeps the quota', async () => {
    scenarios['break'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${FRAMES.slice(0, 2).join('\n\n')}\n\n`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      response.socket?.resetAndDestroy();
    };
    const events = parseSse(await (await server.post('/api/chat/stream', { message: 'break', session_id: 'broken' })).text());
    const remainingAtStart = events[0]!.data.remaining;
    assert.equal(events.at(-1)!.event, 'error');
    const stored = await session('broken');
    assert.equal(stored.messages[1].content, 'Bonjour');
    assert.equal(stored.messages[1].incomplete, true);
    const next = await json(server.post('/api/chat/', { message: 'again' }));
    assert.equal(next.remaining, remainingAtStart - 1);
  });

  test('an upstream failure before any output stores nothing and gives the quota back', async () => {
    scenarios['refuse'] = (response) => {
      response.writeHead(503).end();
    };
    const before = await json(server.post('/api/chat/', { message: 'count' }));
    const events = parseSse(await (await server.post('/api/chat/stream', { message: 'refuse', session_id: 'refused' })).text());
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'error'],
    );
    assert.equal(events[0]!.data.remaining, before.remaining - 1);
    assert.deepEqual(events[1]!.data.error, { code: 'upstream_error', message: 'The openai upstream failed (HTTP 503).' });
    assert.equal((await server.fetch('/api/chat/session/refused')).status, 404);
    const afterwards = await json(server.post('/api/chat/', { message: 'count' }));
    assert.equal(afterwards.remaining, before.remaining - 1);
  });
});
