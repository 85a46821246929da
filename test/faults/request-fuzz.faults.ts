/**
 * Fault suite: 10,000 generated request bodies against the chat, image, admin and knowledge-base
 * routes. Every answer is below 500 and every request is answered (no hang past its deadline).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const ADMIN = 'admin-token-fuzz-0123456789';
const ROUTES = [
  '/api/chat/',
  '/api/chat/progress',
  '/api/chat/search',
  '/api/chat/image',
  '/api/admin/users',
  '/api/rag/documents',
  '/api/keys',
];
/** No request may take longer than this (a hang is a failure, not a slow pass). */
const DEADLINE_MS = 10_000;

let server: ServerProcess;
before(async () => {
  server = await startServerProcess({
    env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
    config: { anonymous_max_parallel: 1000, plans: { free: { quota: 1_000_000, window_seconds: 86_400 } } },
  });
});
after(async () => {
  await server.close();
});

const jsonValue = fc.jsonValue({ maxDepth: 6 });
/** Bodies shaped like real requests with wrong or extreme fields, and arbitrary JSON and bytes. */
const body = fc.oneof(
  fc
    .record(
      {
        message: fc.oneof(fc.string({ maxLength: 2000 }), jsonValue),
        model: fc.oneof(fc.string(), jsonValue),
        history: fc.oneof(
          fc.array(fc.record({ role: fc.string(), content: fc.oneof(fc.string(), jsonValue) }), { maxLength: 120 }),
          jsonValue,
        ),
        session_id: fc.oneof(fc.string({ maxLength: 300 }), jsonValue),
        rag: fc.oneof(
          fc.boolean(),
          fc.record({ top_k: fc.oneof(fc.integer(), jsonValue), collection: fc.oneof(fc.string(), jsonValue) }),
          jsonValue,
        ),
        web_search: fc.oneof(fc.boolean(), jsonValue),
        max_tokens: fc.oneof(fc.integer(), fc.double(), jsonValue),
        temperature: fc.oneof(fc.double(), jsonValue),
        prompt: fc.oneof(fc.string({ maxLength: 5000 }), jsonValue),
        size: fc.oneof(fc.constantFrom('256x256', '512x512', '1x1', ''), jsonValue),
        n: fc.oneof(fc.integer(), jsonValue),
        user_id: fc.oneof(fc.string({ maxLength: 200 }), jsonValue),
        title: fc.oneof(fc.string(), jsonValue),
        text: fc.oneof(fc.string({ maxLength: 3000 }), jsonValue),
      },
      { requiredKeys: [] },
    )
    .map((value) => JSON.stringify(value)),
  jsonValue.map((value) => JSON.stringify(value)),
  fc.string({ maxLength: 500 }),
  fc.uint8Array({ maxLength: 500 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
);

describe('fuzzed request bodies', () => {
  test('10,000 generated bodies: no 5xx, no hang', { timeout: 600_000 }, async () => {
    let sent = 0;
    await server.eventLoopDelay();
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), body, fc.boolean(), async (route, text, asAdmin) => {
        sent += 1;
        const controller = new AbortController();
        const deadline = setTimeout(() => controller.abort(), DEADLINE_MS);
        try {
          const response = await server.fetch(route, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...(asAdmin ? { authorization: `Bearer ${ADMIN}` } : {}) },
            body: text,
            signal: controller.signal,
          });
          await response.arrayBuffer();
          assert.ok(response.status < 500, `${route} answered ${response.status} for ${text.slice(0, 200)}`);
        } finally {
          clearTimeout(deadline);
        }
      }),
      { numRuns: 10_000 },
    );
    assert.equal(sent >= 10_000, true);
    const delay = await server.eventLoopDelay();
    console.log(
      `fuzzed bodies: ${sent} sent in ${Math.round((performance.now() - started) / 1000)} s; server event-loop delay p99 ${delay.p99_ms} ms, max ${delay.max_ms} ms`,
    );
  });
});
