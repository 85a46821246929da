/**
 * Fault suite: a storm of broken upstream behaviour (resets before and after the first byte,
 * stalls, garbage frames, endless lines and answers, slow drips, 429 and 5xx) under concurrent
 * chats on every encoder. Every reply ends as the contract says (a full answer, a JSON 502/504, or
 * a stream whose last event is `done` or `error`), nothing answers 500, the server stays healthy,
 * and the server's event-loop delay (it runs as its own process, read from its /metrics) stays
 * bounded; the figures are printed for docs/reliability.md.
 */
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { parseSse, startUpstream, type ReplayUpstream } from '../helpers/upstream-replay.js';

const chunk = (text: string) => `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`;
const finish = `data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2 } })}\n\ndata: [DONE]\n\n`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Fault = (response: ServerResponse) => Promise<void> | void;
const FAULTS: Record<string, Fault> = {
  ok: (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' }).end(chunk('fine ') + chunk('answer') + finish);
  },
  'reset before first byte': (response) => {
    response.socket?.destroy();
  },
  'reset after first byte': async (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write(chunk('partial '));
    await sleep(20);
    response.socket?.destroy();
  },
  stall: (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write(chunk('then nothing'));
  },
  garbage: (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: {not json\n\n');
  },
  'endless line': (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    const piece = 'x'.repeat(16 * 1024);
    let sent = 0;
    const pump = () => {
      while (!response.destroyed && sent < 8 * 1024 * 1024) {
        sent += piece.length;
        if (!response.write(piece)) return void response.once('drain', pump);
      }
    };
    response.write('data: ');
    pump();
  },
  'endless answer': (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    let sent = 0;
    const pump = () => {
      while (!response.destroyed && sent < 200_000) {
        sent += 1;
        if (!response.write(chunk('more words '))) return void response.once('drain', pump);
      }
    };
    pump();
  },
  'slow drip': async (response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let index = 0; index < 5 && !response.destroyed; index += 1) {
      response.write(chunk(`drop${index} `));
      await sleep(60);
    }
    response.end(finish);
  },
  '429': (response) => {
    response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' }).end('{"error":{}}');
  },
  '503': (response) => {
    response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{}}');
  },
};
const NAMES = Object.keys(FAULTS);

let upstream: ReplayUpstream;
let server: ServerProcess;

before(async () => {
  upstream = await startUpstream(async (_request, response, recorded) => {
    const message = ((recorded.body as { messages?: Array<{ role: string; content: string }> })?.messages ?? []).at(-1)?.content ?? '';
    const fault = FAULTS[message.split(' #')[0] ?? ''] ?? FAULTS.ok!;
    await fault(response);
  });
  server = await startServerProcess({
    config: {
      models: [{ id: 'storm', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'storm' }],
      upstream: { connect_timeout_ms: 1000, first_byte_timeout_ms: 1000, idle_timeout_ms: 500, retries: 1 },
      upstream_max_frame_bytes: 256 * 1024,
      max_answer_bytes: 512 * 1024,
      anonymous_max_parallel: 1000,
      plans: { free: { quota: 1_000_000, window_seconds: 86_400 } },
    },
  });
});
after(async () => {
  await server.close();
  await upstream.close();
});

describe('a storm of broken upstreams', () => {
  test('every reply ends as the contract says, nothing is a 500, the server stays healthy', { timeout: 300_000 }, async () => {
    await server.eventLoopDelay();
    const outcomes = new Map<string, number>();
    const count = (key: string) => outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    const routes = ['/api/chat/', '/api/chat/stream', '/api/chat/progress'];
    for (let wave = 0; wave < 10; wave += 1) {
      await Promise.all(
        Array.from({ length: 30 }, async (_, index) => {
          const fault = NAMES[(wave * 30 + index) % NAMES.length]!;
          const route = routes[index % routes.length]!;
          const response = await server.post(route, { message: `${fault} #${wave}-${index}`, model: 'storm' });
          const text = await response.text();
          assert.notEqual(response.status, 500, `${fault} on ${route}`);
          if (route === '/api/chat/') {
            assert.ok([200, 502, 504].includes(response.status), `${fault} on ${route}: ${response.status}`);
            count(`json ${response.status}`);
          } else if (route === '/api/chat/stream') {
            assert.equal(response.status, 200);
            const last = parseSse(text).at(-1)?.event;
            assert.ok(last === 'done' || last === 'error', `${fault} on ${route} ended with ${last}`);
            count(`sse ${last}`);
          } else {
            const last = JSON.parse(text.trim().split('\n').at(-1) ?? '{}') as { type?: string };
            assert.ok(last.type === 'result' || last.type === 'error', `${fault} on ${route} ended with ${last.type}`);
            count(`ndjson ${last.type}`);
          }
        }),
      );
    }
    const delay = await server.eventLoopDelay();
    assert.equal((await server.fetch('/health')).status, 200);
    const figures = {
      requests: [...outcomes.values()].reduce((sum, value) => sum + value, 0),
      outcomes: Object.fromEntries(outcomes),
      server_event_loop_delay_ms: { p99: delay.p99_ms, max: delay.max_ms },
    };
    console.log(`fault storm figures: ${JSON.stringify(figures)}`);
    // Generous bound only (the machine is shared); docs/reliability.md carries the measured figures.
    assert.ok(delay.max_ms < 2000, `event loop held for ${delay.max_ms} ms`);
  });

  test('endless answers read from buffers let the server event loop turn: delay max under 150 ms (it once held the loop ~200 ms)', async () => {
    // An answer arriving faster than it is read is consumed without waiting for I/O; before the
    // generation loop let the event loop through every 5 ms, each one held the server for its length.
    await server.eventLoopDelay();
    const replies = await Promise.all(
      Array.from({ length: 8 }, async (_, index) => {
        const response = await server.post('/api/chat/', { message: `endless answer #x-${index}`, model: 'storm' });
        return { status: response.status, body: (await response.json()) as { finish_reason?: string } };
      }),
    );
    const delay = await server.eventLoopDelay();
    for (const reply of replies) assert.deepEqual([reply.status, reply.body.finish_reason], [200, 'length']);
    console.log(`endless answers: server event-loop delay p99 ${delay.p99_ms} ms, max ${delay.max_ms} ms`);
    assert.ok(delay.max_ms < 150, `the server's event loop was held for ${delay.max_ms} ms`);
  });
});
