/**
 * The read routes the dashboard fills its pickers from: GET /api/admin/plans (admin only) and
 * GET /api/rag/collections (any caller), against the real server and a real knowledge base.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'picker-routes-admin-token-0123456789';
const asAdmin = { authorization: `Bearer ${ADMIN}` };

describe('the routes behind the dashboard pickers', () => {
  let server: TestServer;
  let userKey = '';

  before(async () => {
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: {
        plans: {
          starter: { quota: 10, window_seconds: 3600 },
          team: { quota: 500, window_seconds: 86400, max_parallel: 4 },
        },
        default_plan: 'starter',
        anonymous_plan: 'starter',
      },
    });
    assert.equal((await server.post('/api/admin/users', { user_id: 'picker' }, asAdmin)).status, 201);
    const created = await server.post('/api/admin/users/picker/keys', {}, asAdmin);
    userKey = ((await created.json()) as { key: string }).key;
  });
  after(() => server.close());

  it('lists the configured plans to the admin, with the default and anonymous plans named', async () => {
    const response = await server.fetch('/api/admin/plans', { headers: asAdmin });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('cache-control'), 'no-store');
    assert.deepEqual(await response.json(), {
      default_plan: 'starter',
      anonymous_plan: 'starter',
      plans: [
        { name: 'starter', quota: 10, window_seconds: 3600 },
        { name: 'team', quota: 500, window_seconds: 86400, max_parallel: 4 },
      ],
    });
  });

  it('refuses the plan list without the admin token (401) and to a user key (403)', async () => {
    const anonymous = await server.fetch('/api/admin/plans');
    assert.equal(anonymous.status, 401);
    assert.equal(((await anonymous.json()) as { error: { code: string } }).error.code, 'unauthorized');
    const user = await server.fetch('/api/admin/plans', { headers: { authorization: `Bearer ${userKey}` } });
    assert.equal(user.status, 403);
    assert.equal(((await user.json()) as { error: { code: string } }).error.code, 'forbidden');
  });

  it('lists the knowledge-base collections with their counts to a signed-in user, empty at first', async () => {
    const headers = { authorization: `Bearer ${userKey}` };
    const empty = await server.fetch('/api/rag/collections', { headers });
    assert.equal(empty.status, 200);
    assert.deepEqual(await empty.json(), { collections: [] });

    for (const [title, collection] of [
      ['Refunds', 'support'],
      ['Shipping', 'support'],
      ['Roadmap', 'product'],
    ] as const) {
      const added = await server.post('/api/rag/documents', { title, text: `${title} policy. `.repeat(20), collection }, asAdmin);
      assert.equal(added.status, 201);
      await added.arrayBuffer();
    }
    const listed = await server.fetch('/api/rag/collections', { headers });
    const { collections } = (await listed.json()) as { collections: Array<{ name: string; documents: number; chunks: number }> };
    assert.deepEqual(
      collections.map(({ name, documents }) => [name, documents]),
      [
        ['product', 1],
        ['support', 2],
      ],
    );
    assert.ok(collections.every((collection) => collection.chunks >= collection.documents));
  });

  it('refuses a wrong key on the collection list with 401, never answering it as anonymous', async () => {
    const response = await server.fetch('/api/rag/collections', {
      headers: { authorization: `Bearer ck_0000000000000000_${'x'.repeat(43)}` },
    });
    assert.equal(response.status, 401);
    await response.arrayBuffer();
  });
});
