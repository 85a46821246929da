import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSocket } from './helpers/raw-http.js';
import { bootServer, type TestServer } from './helpers/server.js';

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const WORDS = ['one ', 'two ', 'three ', 'four ', 'five ', 'six ', 'seven ', 'eight'];
/** How long the slow upstream stays silent before its first byte of body. */
const SILENCE_MS = 600;

describe('events of one upstream read travel together through the pipeline, and nothing ready is held back', () => {
  let upstream: http.Server;
  let server: TestServer;

  before(async () => {
    // `burst` answers the whole reply in one write; `slow` sends the head, stays silent, then the reply.
    upstream = http.createServer((request, response) => {
      let text = '';
      request.on('data', (piece: Buffer) => {
        text += piece.toString();
      });
      request.on('end', () => {
        const model = (JSON.parse(text) as { model: string }).model;
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        const reply = `${chunk({ role: 'assistant' })}${WORDS.map((word) => chunk({ content: word })).join('')}${chunk({}, 'stop')}data: [DONE]\n\n`;
        if (model === 'burst') response.end(reply);
        else {
          response.flushHeaders();
          setTimeout(() => response.end(reply), SILENCE_MS);
        }
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    const base_url = `http://127.0.0.1:${port}/v1`;
    server = await bootServer({
      config: {
        models: [
          { id: 'burst', provider: 'openai', base_url },
          { id: 'slow', provider: 'openai', base_url },
        ],
      },
    });
  });
  after(async () => {
    await server.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  test('the deltas an upstream sent in one read reach an SSE client whole and in order, one frame each', async () => {
    const socket = await openSocket(server.port);
    const body = JSON.stringify({ message: 'count to eight', model: 'burst' });
    let all = '';
    const done = new Promise<void>((resolve, reject) => {
      socket.on('data', (piece: Buffer) => {
        all += piece.toString();
        if (all.includes('event: done')) resolve();
      });
      socket.on('error', reject);
    });
    socket.write(
      `POST /api/chat/stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await Promise.race([done, sleep(10_000).then(() => assert.fail(`no done event: ${all}`))]);
    socket.destroy();
    const deltas = [...all.matchAll(/event: delta\r?\ndata: (.*)\r?\n/g)].map((match) => (JSON.parse(match[1]!) as { text: string }).text);
    assert.deepEqual(deltas, WORDS);
    assert.ok(all.indexOf('event: start') < all.indexOf('event: delta') && all.lastIndexOf('event: delta') < all.indexOf('event: done'));
  });

  test('the progress stream reports generating while the upstream is still silent, long before the result', async () => {
    const started = performance.now();
    const response = await fetch(`http://127.0.0.1:${server.port}/api/chat/progress`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ message: 'take your time', model: 'slow' }),
    });
    assert.equal(response.status, 200);
    const arrivals = new Map<string, number>();
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const piece of response.body!) {
      buffered += decoder.decode(piece, { stream: true });
      let newline = buffered.indexOf('\n');
      while (newline >= 0) {
        const line = JSON.parse(buffered.slice(0, newline)) as { type: string; stage?: string };
        buffered = buffered.slice(newline + 1);
        const name = line.stage ?? line.type;
        if (!arrivals.has(name)) arrivals.set(name, performance.now() - started);
        newline = buffered.indexOf('\n');
      }
    }
    const generating = arrivals.get('generating');
    const result = arrivals.get('result');
    assert.ok(generating !== undefined && result !== undefined, [...arrivals.keys()].join(','));
    assert.ok(result - generating >= SILENCE_MS / 2, `generating at ${generating} ms, the result at ${result} ms`);
  });
});
