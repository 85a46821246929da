/**
 * Property test: every route, sent random identifiers, cursors and header values up to 10 KB,
 * answers with a client error or success, never a 5xx (each identifier that becomes part of a
 * storage key is validated at the edge).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'admin-token-property-0123456789';
let server: TestServer;
let key = '';

before(async () => {
  server = await bootServer({
    env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
    config: { trust_proxy: true, plans: { free: { quota: 100_000, window_seconds: 86_400 } } },
  });
  const admin = { authorization: `Bearer ${ADMIN}` };
  await server.post('/api/admin/users', { user_id: 'prop' }, admin);
  key = ((await (await server.post('/api/admin/users/prop/keys', {}, admin)).json()) as { key: string }).key;
});

after(async () => {
  await server.close();
});

/** Any text up to 10 KB (any Unicode for bodies and paths; printable ASCII where a header must be). */
const anyText = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 10_000 }), fc.constant('a'.repeat(10_000)));
const headerText = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 10_000 });

type Probe = { method: string; path: (id: string) => string; body?: (id: string) => unknown };
const PROBES: Probe[] = [
  { method: 'GET', path: (id) => `/api/chat/session/${id}` },
  { method: 'DELETE', path: (id) => `/api/chat/session/${id}` },
  { method: 'GET', path: (id) => `/api/chat/quota/${id}` },
  { method: 'GET', path: (id) => `/api/admin/users/${id}` },
  { method: 'PATCH', path: (id) => `/api/admin/users/${id}`, body: () => ({ plan: 'pro' }) },
  { method: 'POST', path: (id) => `/api/admin/users/${id}/keys`, body: () => ({}) },
  { method: 'GET', path: (id) => `/api/admin/users/${id}/keys` },
  { method: 'GET', path: (id) => `/api/admin/users?after=${id}` },
  { method: 'GET', path: (id) => `/api/rag/documents?after=${id}&collection=${id}` },
  { method: 'DELETE', path: (id) => `/api/rag/documents/${id}` },
  { method: 'DELETE', path: (id) => `/api/keys/${id}` },
  { method: 'POST', path: () => '/api/admin/users', body: (id) => ({ user_id: id }) },
  { method: 'POST', path: () => '/api/chat/', body: (id) => ({ message: 'hi', session_id: id }) },
  { method: 'POST', path: () => '/api/chat/', body: (id) => ({ message: 'hi', rag: { collection: id } }) },
  { method: 'POST', path: () => '/api/chat/progress', body: (id) => ({ message: id || 'x', history: [{ role: 'user', content: id }] }) },
  { method: 'POST', path: () => '/api/rag/documents', body: (id) => ({ title: id, text: id || 'x', collection: id, url: id }) },
];

describe('random identifiers, cursors and headers never produce a 5xx', () => {
  test('every route answers below 500 for ids, cursors and header values up to 10 KB', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: PROBES.length - 1 }),
        anyText,
        headerText,
        fc.constantFrom('admin', 'key', 'anonymous'),
        async (index, id, header, who) => {
          const probe = PROBES[index]!;
          const authorization = who === 'admin' ? `Bearer ${ADMIN}` : who === 'key' ? `Bearer ${key}` : undefined;
          const response = await server.fetch(probe.path(encodeURIComponent(id)), {
            method: probe.method,
            headers: {
              'content-type': 'application/json',
              'x-forwarded-for': header,
              'x-request-id': header,
              ...(authorization ? { authorization } : {}),
            },
            ...(probe.body ? { body: JSON.stringify(probe.body(id)) } : {}),
          });
          await response.arrayBuffer();
          assert.ok(response.status < 500, `${probe.method} ${probe.path('…')} answered ${response.status}`);
        },
      ),
      { numRuns: 400 },
    );
  });
});
