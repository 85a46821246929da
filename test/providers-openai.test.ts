import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bootServer, type TestServer } from './helpers/server.js';
import { fixture, parseSse, startUpstream, writeSplit, type ReplayUpstream } from './helpers/upstream-replay.js';

const KEY = 'sk-test-SECRET-0123456789';
const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

/** Each test picks its upstream behaviour with the user message; the upstream reads it back. */
const scenarios: Record<string, (response: import('node:http').ServerResponse, attempt: number) => Promise<void> | void> = {};
let releaseSecondHalf: (() => void) | undefined;

let upstream: ReplayUpstream;
let server: TestServer;

function lastUserMessage(body: any): string {
  const users = (body?.messages ?? []).filter((message: any) => message.role === 'user');
  return users.at(-1)?.content ?? '';
}

const attempts = new Map<string, number>();

before(async () => {
  upstream = await startUpstream(async (_request, response, recorded) => {
    const name = lastUserMessage(recorded.body);
    const attempt = (attempts.get(name) ?? 0) + 1;
    attempts.set(name, attempt);
    const scenario = scenarios[name];
    if (!scenario) {
      response.writeHead(404).end();
      return;
    }
    await scenario(response, attempt);
  });
  server = await bootServer({
    env: { TEST_OPENAI_KEY: KEY },
    config: {
      // The slow-reader case streams 8 MB through; the answer bound is not what it tests.
      max_answer_bytes: 16 * 1024 * 1024,
      models: [
        {
          id: 'gpt-test',
          provider: 'openai',
          base_url: `${upstream.url}/v1`,
          api_key_env: 'TEST_OPENAI_KEY',
          upstream_model: 'gpt-4o-mini',
        },
      ],
      upstream: { connect_timeout_ms: 1000, first_byte_timeout_ms: 1500, idle_timeout_ms: 300, retries: 2 },
      plans: { free: { quota: 1000, window_seconds: 86_400 } },
    },
  });
});

after(async () => {
  await server.close();
  await upstream.close();
});

async function chat(path: string, body: Record<string, unknown>): Promise<Response> {
  return server.post(path, { model: 'gpt-test', ...body });
}

async function json(response: Response | Promise<Response>): Promise<any> {
  return (await response).json();
}

async function backpressureWaits(): Promise<number> {
  const text = await (await server.fetch('/metrics')).text();
  return Number(/^colloquy_backpressure_waits_total (\d+)/m.exec(text)?.[1] ?? '0');
}

/** Waits `ms`, or less if the client side of `response` closed first. */
function hold(response: import('node:http').ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    response.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe('openai-compatible upstream', () => {
  test('a reply split at random byte offsets, mid UTF-8 included, arrives whole with upstream usage', async () => {
    scenarios['split'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      await writeSplit(response, fixture('openai-stream.sse'), 7, 11);
      response.end();
    };
    const response = await chat('/api/chat/', { message: 'split', language: 'fr', temperature: 0.3, max_tokens: 64, system: 'Be brief.' });
    assert.equal(response.status, 200);
    const body = await json(response);
    assert.equal(body.response, 'Bonjour ! Le café coûte 3 € — 日本語 もOK 🎉.');
    assert.deepEqual(body.usage, { input_tokens: 21, output_tokens: 12 });
    assert.equal(body.finish_reason, 'stop');
    assert.equal(body.model, 'gpt-test');
    for (const field of ['response', 'model', 'plan', 'remaining', 'reset', 'timestamp']) assert.ok(field in body, field);

    const sent = upstream.requests.at(-1)!;
    assert.equal(sent.url, '/v1/chat/completions');
    assert.equal(sent.headers.authorization, `Bearer ${KEY}`);
    assert.equal(sent.body.model, 'gpt-4o-mini');
    assert.equal(sent.body.stream, true);
    assert.deepEqual(sent.body.stream_options, { include_usage: true });
    assert.equal(sent.body.temperature, 0.3);
    assert.equal(sent.body.max_tokens, 64);
    assert.equal(sent.body.messages[0].role, 'system');
    assert.match(sent.body.messages[0].content, /Be brief\./);
    assert.match(sent.body.messages[0].content, /French \(fr\)/);
    assert.deepEqual(sent.body.messages.at(-1), { role: 'user', content: 'split' });
    assert.equal(sent.body.reasoning_effort, undefined);
  });

  test('reasoning_content becomes thinking, apart from the answer, only when deep thinking is asked', async () => {
    scenarios['reason'] = (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.end(fixture('openai-reasoning.sse'));
    };
    const deep = await json(chat('/api/chat/', { message: 'reason', deep_thinking: true }));
    assert.equal(deep.thinking, 'The user asks for 2+2. That is 4.');
    assert.equal(deep.response, '2 + 2 = 4.');
    assert.equal(upstream.requests.at(-1)!.body.reasoning_effort, 'high');

    const plain = await json(chat('/api/chat/', { message: 'reason' }));
    assert.equal(plain.response, '2 + 2 = 4.');
    assert.equal(plain.thinking, undefined);
  });

  test('the reasoning field and <think> tags split across frames are normalised into thinking events', async () => {
    scenarios['field'] = (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.end(fixture('openai-reasoning-field.sse'));
    };
    scenarios['tags'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      await writeSplit(response, fixture('openai-think-tags.sse'), 3, 5);
      response.end();
    };
    const field = await json(chat('/api/chat/', { message: 'field', deep_thinking: true }));
    assert.equal(field.thinking, 'Short thought.');
    assert.equal(field.response, 'Answer.');

    const events = parseSse(await (await chat('/api/chat/stream', { message: 'tags', deep_thinking: true })).text());
    const thinking = events
      .filter((event) => event.event === 'thinking')
      .map((event) => event.data.text)
      .join('');
    const answer = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.equal(thinking, 'Check the units first.');
    assert.equal(answer, '\n\nIt is 42 km.');
    assert.equal(events.at(-1)!.event, 'done');
    assert.equal(events.at(-1)!.data.finish_reason, 'length');
  });

  test('malformed JSON in a frame ends the SSE stream with an upstream_error event after the deltas already sent', async () => {
    scenarios['malformed'] = (response) => {
      response.writeHead(200, SSE_HEADERS);
      const good = fixture('openai-stream.sse').split('\n\n').slice(0, 3).join('\n\n');
      response.end(`${good}\n\ndata: {"choices":[{"delta":{"content":"oops"}\n\n`);
    };
    const response = await chat('/api/chat/stream', { message: 'malformed' });
    assert.equal(response.status, 200);
    const events = parseSse(await response.text());
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'delta', 'delta', 'error'],
    );
    assert.deepEqual(events.at(-1)!.data, { error: { code: 'upstream_error', message: 'The openai upstream sent a malformed frame.' } });
  });

  test('a 500 is retried before the first byte and succeeds when the upstream recovers', async () => {
    scenarios['flaky'] = (response, attempt) => {
      if (attempt < 3) {
        response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom"}}');
        return;
      }
      response.writeHead(200, SSE_HEADERS);
      response.end(fixture('openai-stream.sse'));
    };
    const response = await chat('/api/chat/', { message: 'flaky' });
    assert.equal(response.status, 200);
    assert.equal(attempts.get('flaky'), 3);
  });

  test('a 500 that persists becomes 502 upstream_error after the configured retries, and the quota is refunded', async () => {
    scenarios['down'] = (response) => {
      response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"internal"}}');
    };
    const before = await json(chat('/api/chat/', { message: 'split' }));
    const response = await chat('/api/chat/', { message: 'down' });
    assert.equal(response.status, 502);
    // The reply reports the quota as it stands after the refund, not the stale figure of the take.
    assert.equal(response.headers.get('ratelimit-remaining'), String(before.remaining));
    assert.deepEqual(await json(response), { error: { code: 'upstream_error', message: 'The openai upstream failed (HTTP 500).' } });
    assert.equal(attempts.get('down'), 3);
    const afterwards = await json(chat('/api/chat/', { message: 'split' }));
    // One request in between that failed before producing anything: it cost nothing.
    assert.equal(afterwards.remaining, before.remaining - 1);
  });

  test('a 429 becomes 502 upstream_error saying the upstream is rate limiting', async () => {
    scenarios['limited'] = (response) => {
      response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{"type":"rate_limit"}}');
    };
    const response = await chat('/api/chat/stream', { message: 'limited' });
    const events = parseSse(await response.text());
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'error'],
    );
    assert.deepEqual(events[1]!.data.error, {
      code: 'upstream_error',
      message: 'The openai upstream is rate limiting this server (HTTP 429); try again shortly.',
    });
  });

  test('a 401 echoing the key is reported without the key', async () => {
    scenarios['badkey'] = (response) => {
      response
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `Incorrect API key provided: ${KEY}` } }));
    };
    const response = await chat('/api/chat/', { message: 'badkey' });
    assert.equal(response.status, 502);
    const text = await response.text();
    assert.ok(!text.includes(KEY));
    assert.equal(JSON.parse(text).error.message, 'The openai upstream refused the configured credentials (HTTP 401).');
  });

  test('a stall after the first chunk ends the stream with upstream_timeout once the idle timeout passes', async () => {
    scenarios['stall'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${fixture('openai-stream.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`);
      await hold(response, 3000);
      if (!response.destroyed) response.end();
    };
    const started = performance.now();
    const events = parseSse(await (await chat('/api/chat/stream', { message: 'stall' })).text());
    const elapsed = performance.now() - started;
    assert.deepEqual(
      events.map((event) => event.event),
      ['start', 'delta', 'error'],
    );
    assert.equal(events[1]!.data.text, 'Bonjour');
    assert.deepEqual(events[2]!.data.error, {
      code: 'upstream_timeout',
      message: 'The openai upstream stopped sending in the middle of the reply.',
    });
    assert.ok(elapsed < 2000, `took ${elapsed} ms`);
  });

  test('a reset mid-stream becomes an error line in NDJSON, never a truncated result', async () => {
    scenarios['reset'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${fixture('openai-stream.sse').split('\n\n').slice(0, 3).join('\n\n')}\n\n`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      response.socket?.resetAndDestroy();
    };
    const text = await (await chat('/api/chat/progress', { message: 'reset' })).text();
    const lines = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(lines.at(-1), {
      type: 'error',
      error: { code: 'upstream_error', message: 'The openai upstream connection broke in the middle of the reply.' },
    });
    assert.ok(!lines.some((line) => line.type === 'result'));
  });

  test('a stream that ends without [DONE] or a finish reason is an error, not a short success', async () => {
    scenarios['truncated'] = (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.end(`${fixture('openai-stream.sse').split('\n\n').slice(0, 3).join('\n\n')}\n\n`);
    };
    const response = await chat('/api/chat/', { message: 'truncated' });
    assert.equal(response.status, 502);
    assert.equal((await json(response)).error.message, 'The openai upstream ended the reply before finishing it.');
  });

  test('the first delta reaches the client while the upstream is still sending', async () => {
    const secondHalf = new Promise<void>((resolve) => (releaseSecondHalf = resolve));
    scenarios['live'] = async (response) => {
      const frames = fixture('openai-stream.sse').split('\n\n');
      response.writeHead(200, SSE_HEADERS);
      response.write(`${frames.slice(0, 2).join('\n\n')}\n\n`);
      await secondHalf;
      response.end(frames.slice(2).join('\n\n'));
    };
    const response = await chat('/api/chat/stream', { message: 'live' });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    while (!seen.includes('event: delta')) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'stream ended before the first delta');
      seen += decoder.decode(value, { stream: true });
    }
    // The upstream has not finished: it is waiting for us to release the rest.
    assert.ok(!seen.includes('event: done'));
    releaseSecondHalf!();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += decoder.decode(value, { stream: true });
    }
    assert.match(seen, /event: done/);
  });

  test('a client that stops reading pauses the upstream read without tripping the idle timeout', async () => {
    const piece = 'x'.repeat(400);
    // However much the host's socket buffers hold, the flood goes on until the gateway has had to
    // wait for the client, then sends 2,000 deltas more (within the 16 MiB answer bound).
    let deltas = 0;
    scenarios['flood'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      const frame = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`;
      let waited = false;
      const watch = async () => {
        while (!waited && !response.writableEnded) {
          if ((await backpressureWaits()) > waitsBefore) waited = true;
          else await sleep(20);
        }
      };
      watch().catch(() => {});
      for (let after = 0; after < 2_000 && deltas < 40_000 && !response.destroyed; deltas++) {
        if (waited) after++;
        if (!response.write(frame)) await new Promise((resolve) => response.once('drain', resolve));
      }
      response.end(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
    };
    const waitsBefore = await backpressureWaits();
    const { request } = await import('node:http');
    const text = await new Promise<string>((resolve, reject) => {
      const outgoing = request(
        `${server.url}/api/chat/stream`,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (incoming) => {
          // Not reading for three idle timeouts, and until the server had to wait for us (on a busy
          // machine filling the socket buffers takes longer): it must wait, not give up on the upstream.
          incoming.pause();
          const chunks: Buffer[] = [];
          const pausedAt = performance.now();
          const resumeWhenBlocked = async (): Promise<void> => {
            while ((await backpressureWaits()) <= waitsBefore && performance.now() - pausedAt < 20_000) await sleep(50);
            await sleep(Math.max(0, 900 - (performance.now() - pausedAt)));
            incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
            incoming.resume();
          };
          resumeWhenBlocked().catch(reject);
          incoming.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
          incoming.on('error', reject);
        },
      );
      outgoing.end(JSON.stringify({ model: 'gpt-test', message: 'flood' }));
    });
    const events = parseSse(text);
    assert.equal(events.at(-1)!.event, 'done');
    const answer = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.equal(answer.length, piece.length * deltas);
    assert.ok((await backpressureWaits()) > waitsBefore, 'the stream waited for the slow client');
  });

  test('a client that disconnects closes the upstream connection within a second', async () => {
    scenarios['abandon'] = async (response) => {
      response.writeHead(200, SSE_HEADERS);
      response.write(`${fixture('openai-stream.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`);
      // Keeps the stream open for far longer than the test waits.
      await hold(response, 5000);
      if (!response.destroyed) response.end();
    };
    const response = await chat('/api/chat/stream', { message: 'abandon' });
    const reader = response.body!.getReader();
    let seen = '';
    while (!seen.includes('event: delta')) seen += new TextDecoder().decode((await reader.read()).value);
    const index = upstream.requests.length - 1;
    const cancelledAt = performance.now();
    await reader.cancel();
    const closedAt = await upstream.closed(index);
    assert.ok(closedAt - cancelledAt < 1000, `upstream closed after ${closedAt - cancelledAt} ms`);
  });
});
