import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { HttpServer } from '../src/http/server.js';
import type { Route } from '../src/http/types.js';
import { startHttpServer } from './helpers/http-server.js';
import { openSocket, readFor, readUntil } from './helpers/raw-http.js';

const LIMIT = 64 * 1024;
const routes: Route[] = [
  {
    method: 'POST',
    path: '/echo',
    handler: async (context) => {
      const body = await context.readJson();
      context.json(200, { received: body });
    },
  },
  { method: 'GET', path: '/items/:id', handler: (context) => context.json(200, { id: context.request.params.id }) },
  { method: 'DELETE', path: '/items/:id', handler: (context) => context.json(200, { deleted: context.request.params.id }) },
  {
    method: 'GET',
    path: '/boom',
    handler: () => {
      throw new Error('secret internal detail at /srv/app.ts:12');
    },
  },
];

describe('the HTTP layer', () => {
  let server: HttpServer;
  let base: string;
  let port: number;
  const internalErrors: unknown[] = [];

  before(async () => {
    ({ server, port } = await startHttpServer(routes, {
      limits: { maxBytes: LIMIT, maxDepth: 8 },
      onInternalError: (error) => internalErrors.push(error),
    }));
    base = `http://127.0.0.1:${port}`;
  });
  after(() => server.close(100));

  const post = (body: string | Uint8Array, contentType = 'application/json') =>
    fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': contentType }, body });

  async function expectError(response: Response, status: number, code: string) {
    assert.equal(response.status, status);
    assert.match(response.headers.get('content-type') ?? '', /application\/json/);
    const body = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, code);
    assert.ok(body.error.message.length > 0);
    return body;
  }

  it('parses a JSON body and answers with security headers and no X-Powered-By', async () => {
    const response = await post('{"message":"héllo"}', 'application/json; charset=utf-8');
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { received: { message: 'héllo' } });
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(response.headers.get('x-powered-by'), null);
  });

  it('refuses malformed JSON with 400 invalid_json', async () => {
    await expectError(await post('{"message": '), 400, 'invalid_json');
  });

  it('refuses bytes that are not UTF-8 with 400 invalid_json', async () => {
    await expectError(await post(new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 400, 'invalid_json');
  });

  it('refuses JSON nested deeper than the cap before parsing it', async () => {
    const body = await expectError(await post('['.repeat(9) + ']'.repeat(9)), 400, 'invalid_json');
    assert.match(body.error.message, /deeper than 8/);
    const ok = await post('['.repeat(8) + ']'.repeat(8));
    assert.equal(ok.status, 200);
  });

  it('refuses a body that is not JSON with 415 unsupported_media_type', async () => {
    await expectError(await post('message=hi', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
    const none = await fetch(`${base}/echo`, { method: 'POST', body: new Uint8Array([123, 125]) });
    await expectError(none, 415, 'unsupported_media_type');
  });

  it('refuses a body above the limit with 413 from its declared length, before reading it', async () => {
    const socket = await openSocket(port);
    // Declare far more than the limit but send only the headers: the reply must not wait for the body.
    socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT * 100}\r\n\r\n`);
    const reply = await readUntil(socket, 'payload_too_large');
    assert.match(reply, /^HTTP\/1\.1 413/);
    socket.destroy();
  });

  it('reads a body whose declared length arrives in many small writes, byte for byte', async () => {
    const text = 'ünïcode and ascii '.repeat(2000);
    const payload = Buffer.from(JSON.stringify({ text }));
    const socket = await openSocket(port);
    socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`);
    for (let offset = 0; offset < payload.length; offset += 997) {
      socket.write(payload.subarray(offset, offset + 997));
      if (offset % (997 * 8) === 0) await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const reply = await readUntil(socket, '"}}');
    assert.match(reply, /^HTTP\/1\.1 200/);
    const body = Buffer.from(reply.slice(reply.indexOf('\r\n\r\n') + 4), 'latin1').toString('utf8');
    assert.deepEqual(JSON.parse(body), { received: { text } });
    socket.destroy();
  });

  it('reads a chunked body of several chunks, byte for byte', async () => {
    const payload = Buffer.from(JSON.stringify({ parts: Array.from({ length: 300 }, (_, index) => `part ${index}`) }));
    const socket = await openSocket(port);
    socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    for (let offset = 0; offset < payload.length; offset += 1000) {
      const piece = payload.subarray(offset, offset + 1000);
      socket.write(`${piece.length.toString(16)}\r\n`);
      socket.write(piece);
      socket.write('\r\n');
    }
    socket.write('0\r\n\r\n');
    const reply = await readUntil(socket, ']}}');
    assert.match(reply, /^HTTP\/1\.1 200/);
    assert.deepEqual(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)), { received: JSON.parse(payload.toString()) });
    socket.destroy();
  });

  it('refuses a chunked body as soon as it passes the limit, without waiting for the rest', async () => {
    const socket = await openSocket(port);
    socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    const chunk = Buffer.alloc(16 * 1024, 0x20);
    for (let index = 0; index < 5; index += 1) socket.write(`${chunk.length.toString(16)}\r\n${chunk.toString()}\r\n`);
    // The terminating zero-length chunk is never sent: the server answers anyway.
    const reply = await readUntil(socket, 'payload_too_large');
    assert.match(reply, /^HTTP\/1\.1 413/);
    socket.destroy();
  });

  it('answers an unknown route with 404 not_found', async () => {
    await expectError(await fetch(`${base}/nowhere`), 404, 'not_found');
  });

  it('answers a known route with a wrong method with 405 and an Allow header', async () => {
    const response = await fetch(`${base}/items/7`, { method: 'PUT' });
    assert.equal(response.headers.get('allow'), 'GET, DELETE, HEAD');
    await expectError(response, 405, 'method_not_allowed');
  });

  it('decodes path parameters and ignores a trailing slash', async () => {
    const response = await fetch(`${base}/items/a%20b/`);
    assert.deepEqual(await response.json(), { id: 'a b' });
  });

  it('turns an unexpected exception into 500 internal without leaking its message', async () => {
    const response = await fetch(`${base}/boom`);
    const body = await expectError(response, 500, 'internal');
    assert.doesNotMatch(JSON.stringify(body), /secret|srv|app\.ts/);
    assert.equal(internalErrors.length, 1);
  });

  it('survives a burst of garbage on raw sockets and still answers', async () => {
    const garbage = [
      'GARBAGE\r\n\r\n',
      'GET / HTTP/9.9\r\n\r\n',
      '\x00\x01\x02\x03\xff\xfe\r\n\r\n',
      `GET /${'a'.repeat(20000)} HTTP/1.1\r\n\r\n`,
      'POST /echo HTTP/1.1\r\nContent-Length: -5\r\n\r\n',
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"a"',
      `GET /items/1 HTTP/1.1\r\n${'X-Long: y\r\n'.repeat(500)}\r\n`,
    ];
    await Promise.all(
      garbage.map(async (payload) => {
        const socket = await openSocket(port);
        socket.on('error', () => {});
        socket.write(Buffer.from(payload, 'latin1'));
        await readFor(socket, 200);
        socket.destroy();
      }),
    );
    const response = await fetch(`${base}/items/ok`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { id: 'ok' });
  });
});
