import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { compileErrors, validate } from '@readme/openapi-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { buildRoutes } from '../src/routes/index.js';
import { bootServer, type TestServer } from './helpers/server.js';

/**
 * GET /openapi.json describes the service the router serves: it is a valid OpenAPI 3.1 document,
 * its operations are exactly the router's, and every documented example, sent to the real server
 * in the documented order, gets a reply that matches the documented schema (JSON bodies, each SSE
 * event, each NDJSON line).
 */

const ADMIN_TOKEN = 'admin-openapi';
let server: TestServer;
let embeddings: http.Server;
let document: any;
let userKey: string;

before(async () => {
  // The embeddings upstream /v1/embeddings passes through, speaking OpenAI's wire format.
  embeddings = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const inputs: string[] = JSON.parse(Buffer.concat(chunks).toString()).input;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        object: 'list',
        data: inputs.map((_input, index) => ({ object: 'embedding', index, embedding: [0.5, -0.25, index] })),
        model: 'text-embedding-3-small',
        usage: { prompt_tokens: 3, total_tokens: 3 },
      }),
    );
  });
  await new Promise<void>((resolve) => embeddings.listen(0, '127.0.0.1', resolve));
  const port = (embeddings.address() as AddressInfo).port;
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN },
    config: { rag: { embeddings: { base_url: `http://127.0.0.1:${port}/v1`, model: 'text-embedding-3-small' } } },
  });
  document = await (await server.fetch('/openapi.json')).json();
  // The caller the examples run as: a user of its own, so the examples' own users and keys stay theirs.
  assert.equal((await server.post('/api/admin/users', { user_id: 'docs-reader' }, { authorization: `Bearer ${ADMIN_TOKEN}` })).status, 201);
  const created = await server.post('/api/admin/users/docs-reader/keys', '', { authorization: `Bearer ${ADMIN_TOKEN}` });
  userKey = ((await created.json()) as { key: string }).key;
});

after(async () => {
  await server.close();
  await new Promise<void>((resolve) => embeddings.close(() => resolve()));
});

interface DocumentedOperation {
  method: string;
  path: string;
  operation: any;
}

function operationsOf(doc: any): DocumentedOperation[] {
  const found: DocumentedOperation[] = [];
  for (const [path, methods] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(methods)) found.push({ method: method.toUpperCase(), path, operation });
  }
  return found.sort((a, b) => a.operation['x-order'] - b.operation['x-order']);
}

describe('GET /openapi.json', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    assert.equal(document.openapi, '3.1.0');
    const result = await validate(structuredClone(document));
    assert.ok(result.valid, result.valid ? '' : compileErrors(result));
  });

  test('describes exactly the routes the router serves (pages aside)', () => {
    const routed = buildRoutes(server.services)
      .filter((route) => !route.path.startsWith('/dashboard') && route.path !== '/docs' && !route.path.startsWith('/docs/'))
      .map((route) => `${route.method} ${route.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`)
      .sort();
    const documented = operationsOf(document)
      .map(({ method, path }) => `${method} ${path}`)
      .sort();
    assert.deepEqual(documented, routed);
  });

  test('declares the bearer scheme, the RateLimit headers of counted routes and the error shapes', () => {
    assert.deepEqual(document.components.securitySchemes.bearer, {
      type: 'http',
      scheme: 'bearer',
      description: 'An API key (`ck_…`), or the admin token on admin routes.',
    });
    const chat = document.paths['/api/chat'].post;
    assert.deepEqual(Object.keys(chat.responses['200'].headers), ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']);
    assert.ok(chat.responses['4XX'].content['application/json'].schema.properties.error.properties.code.enum.includes('quota_exceeded'));
    const v1 = document.paths['/v1/chat/completions'].post;
    assert.deepEqual(Object.keys(v1.responses['4XX'].content['application/json'].schema.properties.error.properties).sort(), [
      'code',
      'details',
      'message',
      'param',
      'type',
    ]);
    // Request bodies come from the validation schemas: unknown fields refused on /api, ignored on /v1.
    assert.equal(chat.requestBody.content['application/json'].schema.additionalProperties, false);
    assert.equal(v1.requestBody.content['application/json'].schema.additionalProperties, undefined);
  });

  test('every documented example gets a reply matching its documented schema', async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    const check = (schema: object, value: unknown, what: string): void => {
      const valid = ajv.validate(schema, value);
      assert.ok(valid, `${what}: ${ajv.errorsText(ajv.errors)}\n${JSON.stringify(value).slice(0, 600)}`);
    };
    const ids: Record<string, string> = {};
    let ran = 0;
    for (const { method, path, operation } of operationsOf(document)) {
      for (const example of operation['x-examples'] as any[]) {
        let url = path.replace(/\{([A-Za-z_]+)\}/g, (_match: string, name: string) => {
          const documented = operation.parameters.find((parameter: any) => parameter.name === name)?.example;
          return encodeURIComponent(ids[name] ?? documented);
        });
        if (example.query) url += `?${new URLSearchParams(example.query)}`;
        const admin = operation.security.length === 1 || path.startsWith('/api/chat/quota');
        const headers: Record<string, string> = {};
        if (operation.security.length > 0) headers.authorization = `Bearer ${admin ? ADMIN_TOKEN : userKey}`;
        if (example.accept) headers.accept = example.accept;
        if (example.body !== undefined) headers['content-type'] = 'application/json';
        const response = await server.fetch(url, {
          method,
          headers,
          body: example.body === undefined ? undefined : JSON.stringify(example.body),
        });
        const what = `${method} ${url} (${example.name})`;
        const [status, documented] = Object.entries<any>(operation.responses)[0]!;
        assert.equal(String(response.status), status, `${what}: ${await response.clone().text()}`);
        const type = (response.headers.get('content-type') ?? '').split(';')[0]!;
        const media = Object.entries<any>(documented.content).find(([name]) => name.split(';')[0] === type)?.[1];
        assert.ok(media, `${what}: ${type} is not documented`);
        if (documented.headers)
          for (const name of Object.keys(documented.headers)) assert.ok(response.headers.get(name), `${what}: ${name}`);
        const text = await response.text();
        if (type === 'application/json') {
          const body = JSON.parse(text);
          check(media.schema, body, what);
          for (const key of ['key_id', 'document_id']) if (typeof body[key] === 'string' && method === 'POST') ids[key] = body[key];
        } else if (type === 'text/event-stream') {
          const events = text.split('\n\n').filter((frame) => frame.includes('data: '));
          assert.ok(events.length > 0, `${what}: no events`);
          for (const frame of events) {
            const name = /^event: (.*)$/m.exec(frame)?.[1];
            const data = /^data: (.*)$/m.exec(frame)?.[1] ?? '';
            if (data === '[DONE]') continue;
            const parsed = JSON.parse(data);
            if (typeof parsed.stream_id === 'string') ids.stream_id = parsed.stream_id;
            const schema = media['x-events'][name ?? (parsed.error ? 'error' : 'chunk')];
            assert.ok(schema, `${what}: event ${name} is not documented`);
            check(schema, parsed, `${what} event ${name ?? 'chunk'}`);
          }
        } else if (type === 'application/x-ndjson') {
          const lines = text.split('\n').filter((line) => line.length > 0);
          for (const line of lines) {
            const parsed = JSON.parse(line);
            if (typeof parsed.stream_id === 'string') ids.stream_id = parsed.stream_id;
            const schema = media['x-events'][parsed.type];
            assert.ok(schema, `${what}: line type ${parsed.type} is not documented`);
            check(schema, parsed, `${what} line ${parsed.type}`);
          }
          assert.equal(JSON.parse(lines.at(-1)!).type, 'result');
        } else {
          assert.ok(text.length > 0, `${what}: empty body`);
        }
        ran += 1;
      }
    }
    assert.ok(ran >= operationsOf(document).length, `ran ${ran} examples`);
  });

  test('a wrong body is refused as the document says: 4XX in the documented error shape', async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    const refused = await server.post('/api/chat', { message: '' });
    assert.equal(refused.status, 400);
    assert.ok(ajv.validate(document.paths['/api/chat'].post.responses['4XX'].content['application/json'].schema, await refused.json()));
    const v1 = await server.post('/v1/chat/completions', { messages: [] });
    assert.equal(v1.status, 400);
    assert.ok(
      ajv.validate(document.paths['/v1/chat/completions'].post.responses['4XX'].content['application/json'].schema, await v1.json()),
    );
  });
});

describe('GET /docs', () => {
  test('serves the reference page and its assets from the package, under a CSP without inline code', async () => {
    const page = await server.fetch('/docs');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self';/);
    const html = await page.text();
    for (const asset of html.match(/\/docs\/assets\/[a-z.-]+/g) ?? []) {
      const response = await server.fetch(asset);
      assert.equal(response.status, 200, asset);
      assert.ok((await response.arrayBuffer()).byteLength > 0, asset);
    }
    assert.equal((await server.fetch('/docs/assets/nope.js')).status, 404);
  });
});
