import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const APP = 'https://app.example';
let server: TestServer;

before(async () => {
  server = await bootServer({ config: { cors: { origins: [APP] } } });
});
after(async () => {
  await server.close();
});

describe('CORS for browser apps on other origins', () => {
  test('a preflight from a listed origin is answered with the methods and headers a client may send', async () => {
    const response = await server.fetch('/api/chat/stream', {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    assert.equal(response.status, 204);
    assert.equal(response.headers.get('access-control-allow-origin'), APP);
    assert.match(response.headers.get('access-control-allow-methods') ?? '', /POST/);
    const allowed = response.headers.get('access-control-allow-headers') ?? '';
    for (const name of ['authorization', 'content-type', 'last-event-id']) assert.match(allowed, new RegExp(name));
  });

  test('replies to a listed origin carry its origin and expose the RateLimit headers, on JSON and on streams', async () => {
    for (const path of ['/api/chat/', '/api/chat/stream']) {
      const response = await server.post(path, { message: 'hello' }, { origin: APP });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('access-control-allow-origin'), APP);
      assert.equal(response.headers.get('vary'), 'Origin');
      assert.match(response.headers.get('access-control-expose-headers') ?? '', /RateLimit-Remaining/);
      await response.text();
    }
  });

  test('an origin that is not listed gets no CORS headers, and its preflight is refused', async () => {
    const response = await server.post('/api/chat/', { message: 'hello' }, { origin: 'https://evil.example' });
    assert.equal(response.headers.get('access-control-allow-origin'), null);
    await response.text();
    const preflight = await server.fetch('/api/chat/', {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    assert.notEqual(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), null);
  });

  test('paths outside /api and /v1 (the dashboard, metrics) never answer cross-origin', async () => {
    const response = await server.fetch('/metrics', { headers: { origin: APP } });
    assert.equal(response.headers.get('access-control-allow-origin'), null);
  });
});
