import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bootServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const frame = (payload: unknown) => `data: ${JSON.stringify(payload)}\n\n`;
const chunk = (content: string) =>
  frame({
    id: 'c1',
    object: 'chat.completion.chunk',
    model: 'gpt-4o-mini',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  });
const finish = frame({
  id: 'c1',
  object: 'chat.completion.chunk',
  model: 'gpt-4o-mini',
  choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
});

describe('upstream connections', () => {
  let upstream: http.Server;
  let server: TestServer;
  const sockets = new Set<Socket>();
  let closedSockets = 0;
  let bodiesEnded = 0;
  /** `stall-after-done` keeps the body open after [DONE]; anything else ends it a little later. */
  let mode = 'normal';

  before(async () => {
    upstream = http.createServer((request, response) => {
      request.resume();
      request.on('end', async () => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        response.write(chunk('Hello'));
        response.write(chunk(' there'));
        response.write(finish);
        response.write('data: [DONE]\n\n');
        // The terminal frame travels apart from the end of the chunked body, as it does from real
        // servers: the provider stops reading at [DONE] before the body is complete.
        await sleep(20);
        if (mode !== 'stall-after-done') response.end(() => (bodiesEnded += 1));
      });
    });
    upstream.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => {
        closedSockets += 1;
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    server = await bootServer({
      config: {
        models: [{ id: 'gpt-test', provider: 'openai', base_url: `http://127.0.0.1:${port}/v1`, upstream_model: 'gpt-4o-mini' }],
        plans: { free: { quota: 100, window_seconds: 86_400 } },
      },
    });
  });
  after(async () => {
    await server.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  test('sequential chats reuse one kept-alive upstream connection after the terminal frame', async () => {
    for (let index = 0; index < 3; index += 1) {
      const response = await server.post('/api/chat/', { message: `hi ${index}`, model: 'gpt-test' });
      assert.equal(response.status, 200);
      assert.equal(((await response.json()) as { response: string }).response, 'Hello there');
      // The next call goes once the body's end has been sent, so the connection is free again.
      await waitFor(() => bodiesEnded > index);
      await sleep(20);
    }
    assert.equal(sockets.size, 1, 'one TCP connection served all three upstream calls');
    assert.equal(closedSockets, 0);
  });

  test('a reply whose body never ends after [DONE] is answered at once and its socket dropped within the drain limit', async () => {
    mode = 'stall-after-done';
    const before = sockets.size;
    const started = performance.now();
    const response = await server.post('/api/chat/', { message: 'stall', model: 'gpt-test' });
    assert.equal(response.status, 200);
    assert.equal(((await response.json()) as { response: string }).response, 'Hello there');
    assert.ok(performance.now() - started < 500, 'the client does not wait for the rest of the upstream body');
    const closedBefore = closedSockets;
    for (let waited = 0; waited < 2500 && closedSockets === closedBefore; waited += 50) await sleep(50);
    // The pool may open (and at once close) a spare connection as it recovers from the drop.
    assert.ok(closedSockets >= closedBefore + 1, 'the stalled upstream socket was closed');
    assert.ok(sockets.size >= before);
    mode = 'normal';
  });
});
