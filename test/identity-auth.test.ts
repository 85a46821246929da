import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'admin-token-for-tests-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

async function createUser(server: TestServer, userId: string, plan?: string): Promise<Response> {
  return server.post('/api/admin/users', plan ? { user_id: userId, plan } : { user_id: userId }, admin);
}

async function createKey(server: TestServer, userId: string): Promise<{ key_id: string; key: string }> {
  const response = await server.post(`/api/admin/users/${userId}/keys`, '', admin);
  assert.equal(response.status, 201);
  return (await response.json()) as { key_id: string; key: string };
}

describe('identity: callers, keys and the admin API', () => {
  let server: TestServer;

  before(async () => {
    server = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
  });
  after(() => server.close());

  test('a request without Authorization is anonymous, identified by client address, on the anonymous plan', async () => {
    const response = await server.fetch('/api/chat/quota/me');
    assert.equal(response.status, 200);
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(body.user_id, 'anon:127.0.0.1');
    assert.equal(body.plan, 'free');
    assert.equal(body.limit, 50);
  });

  test('a malformed Authorization header is 401 with WWW-Authenticate, never anonymous', async () => {
    for (const value of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer  ', 'ck_abc', 'Bearer a b']) {
      const response = await server.fetch('/api/chat/quota/me', { headers: { authorization: value } });
      assert.equal(response.status, 401, value);
      assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer/);
      const body = (await response.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'unauthorized');
    }
  });

  test('an unknown key, or a known key id with the wrong secret, is 401', async () => {
    assert.equal((await createUser(server, 'mallory')).status, 201);
    const real = await createKey(server, 'mallory');
    const forged = `ck_${real.key_id}_${'A'.repeat(43)}`;
    for (const key of [`ck_0123456789abcdef_${'B'.repeat(43)}`, forged, 'not-a-key-at-all']) {
      const response = await server.fetch('/api/chat/quota/me', { headers: bearer(key) });
      assert.equal(response.status, 401, key);
      assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="colloquy", error="invalid_token"');
    }
  });

  test('a key created by the admin identifies its user and plan', async () => {
    assert.equal((await createUser(server, 'alice', 'pro')).status, 201);
    const { key, key_id } = await createKey(server, 'alice');
    assert.match(key, /^ck_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.ok(key.startsWith(`ck_${key_id}_`));
    const response = await server.fetch('/api/chat/quota/me', { headers: bearer(key) });
    assert.equal(response.status, 200);
    const body = (await response.json()) as Record<string, unknown>;
    assert.deepEqual([body.user_id, body.plan, body.limit], ['alice', 'pro', 2000]);
  });

  test('a caller creates, lists (without secrets) and revokes their own keys; a revoked key is 401 from then on', async () => {
    await createUser(server, 'bob');
    const first = await createKey(server, 'bob');
    const created = await server.post('/api/keys', { name: 'laptop' }, bearer(first.key));
    assert.equal(created.status, 201);
    const second = (await created.json()) as { key_id: string; key: string; name: string };
    assert.equal(second.name, 'laptop');
    assert.equal((await server.fetch('/api/chat/quota/me', { headers: bearer(second.key) })).status, 200);

    // last_used is written after the request that used the key, without delaying it: poll briefly.
    let text = '';
    const firstUsed = (listing: string) =>
      (JSON.parse(listing) as { keys: Array<{ key_id: string; last_used: string | null }> }).keys.find(
        (item) => item.key_id === first.key_id,
      )?.last_used;
    for (let attempt = 0; attempt < 200; attempt += 1) {
      text = await (await server.fetch('/api/keys', { headers: bearer(second.key) })).text();
      if (firstUsed(text)) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.ok(!text.includes(first.key) && !text.includes(second.key), 'a listing never contains a key');
    const keys = (JSON.parse(text) as { keys: Array<{ key_id: string; prefix: string; last_used: string | null; revoked: boolean }> }).keys;
    assert.deepEqual(keys.map((item) => item.key_id).sort(), [first.key_id, second.key_id].sort());
    assert.ok(keys.every((item) => item.prefix === `ck_${item.key_id}` && !item.revoked));
    assert.ok(keys.find((item) => item.key_id === first.key_id)?.last_used, 'a used key records last_used');

    const revoked = await server.fetch(`/api/keys/${second.key_id}`, { method: 'DELETE', headers: bearer(first.key) });
    assert.equal(revoked.status, 200);
    assert.deepEqual(await revoked.json(), { key_id: second.key_id, revoked: true });
    const after = await server.fetch('/api/chat/quota/me', { headers: bearer(second.key) });
    assert.equal(after.status, 401);
    assert.equal((await server.fetch('/api/chat/quota/me', { headers: bearer(first.key) })).status, 200);
  });

  test("a caller cannot revoke another user's key: it is simply not found", async () => {
    await createUser(server, 'carol');
    await createUser(server, 'dave');
    const carol = await createKey(server, 'carol');
    const dave = await createKey(server, 'dave');
    const response = await server.fetch(`/api/keys/${carol.key_id}`, { method: 'DELETE', headers: bearer(dave.key) });
    assert.equal(response.status, 404);
    assert.equal((await server.fetch('/api/chat/quota/me', { headers: bearer(carol.key) })).status, 200);
  });

  test('anonymous callers cannot manage keys', async () => {
    assert.equal((await server.post('/api/keys', {})).status, 401);
    assert.equal((await server.fetch('/api/keys')).status, 401);
  });

  test('admin routes refuse users (403) and anonymous callers (401)', async () => {
    await createUser(server, 'erin');
    const erin = await createKey(server, 'erin');
    const attempts: Array<[string, string, unknown]> = [
      ['POST', '/api/admin/users', { user_id: 'sneaky' }],
      ['GET', '/api/admin/users', undefined],
      ['PATCH', '/api/admin/users/erin', { plan: 'pro' }],
      ['POST', '/api/admin/users/erin/keys', {}],
      ['GET', '/api/admin/users/erin/keys', undefined],
    ];
    for (const [method, path, body] of attempts) {
      const init = (headers: Record<string, string>): RequestInit => ({
        method,
        headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      assert.equal((await server.fetch(path, init(bearer(erin.key)))).status, 403, `${method} ${path} as user`);
      assert.equal((await server.fetch(path, init({}))).status, 401, `${method} ${path} anonymous`);
      assert.equal((await server.fetch(path, init({ authorization: 'Bearer wrong-token' }))).status, 401, `${method} ${path} wrong token`);
    }
    assert.equal(await server.services.users.get('sneaky'), undefined);
    assert.equal((await server.services.users.get('erin'))?.plan, 'free');
  });

  test("admin validation errors name the field and what it accepts, never the validation library's wording", async () => {
    const response = await server.post('/api/admin/users', {}, admin);
    assert.equal(response.status, 400);
    const text = await response.text();
    assert.doesNotMatch(text, /Invalid (key|type)|Expected|received/);
    assert.deepEqual(JSON.parse(text).error.details, [{ path: 'user_id', message: 'is required' }]);
    const wrongType = (await (await server.post('/api/admin/users', { user_id: 7 }, admin)).json()) as any;
    assert.deepEqual(wrongType.error.details, [{ path: 'user_id', message: 'must be a string' }]);
  });

  test('the admin creates users (409 when taken), validates plans and ids, changes plans and lists users', async () => {
    assert.equal((await createUser(server, 'frank')).status, 201);
    const again = await createUser(server, 'frank');
    assert.equal(again.status, 409);
    assert.equal(((await again.json()) as { error: { code: string } }).error.code, 'conflict');

    const badPlan = await createUser(server, 'grace', 'platinum');
    assert.equal(badPlan.status, 400);
    const badBody = (await badPlan.json()) as { error: { code: string; details: Array<{ path: string }> } };
    assert.equal(badBody.error.code, 'invalid_request');
    assert.deepEqual(
      badBody.error.details.map((detail) => detail.path),
      ['plan'],
    );
    for (const userId of ['me', 'admin', 'has space', 'anon:1.2.3.4', '']) {
      const response = await createUser(server, userId);
      assert.equal(response.status, 400, userId);
    }

    const patched = await server.fetch('/api/admin/users/frank', {
      method: 'PATCH',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'pro' }),
    });
    assert.equal(patched.status, 200);
    assert.equal(((await patched.json()) as { plan: string }).plan, 'pro');
    const missing = await server.fetch('/api/admin/users/nobody', {
      method: 'PATCH',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'pro' }),
    });
    assert.equal(missing.status, 404);

    const list = (await (await server.fetch('/api/admin/users?limit=1000', { headers: admin })).json()) as {
      users: Array<{ user_id: string; plan: string }>;
    };
    assert.ok(list.users.some((user) => user.user_id === 'frank' && user.plan === 'pro'));
    const page = (await (await server.fetch('/api/admin/users?limit=2', { headers: admin })).json()) as {
      users: unknown[];
      next_after: string;
    };
    assert.equal(page.users.length, 2);
    const next = (await (await server.fetch(`/api/admin/users?limit=2&after=${page.next_after}`, { headers: admin })).json()) as {
      users: Array<{ user_id: string }>;
    };
    assert.ok(next.users.every((user) => user.user_id > page.next_after));
  });

  test('keys never appear in clear in the data files, only their hash', async () => {
    await createUser(server, 'heidi');
    const { key, key_id } = await createKey(server, 'heidi');
    const secret = key.slice(`ck_${key_id}_`.length);
    await server.services.storage.flush();
    const files = server.storageFiles();
    assert.ok(files.length > 0);
    for (const file of files) {
      const bytes = readFileSync(file);
      assert.equal(bytes.indexOf(secret), -1, `secret found in ${file}`);
      assert.equal(bytes.indexOf(key), -1, `key found in ${file}`);
    }
    // The key id is stored (it is how a key is found), proving the scan reads the right files.
    assert.ok(files.some((file) => readFileSync(file).indexOf(key_id) !== -1));
  });
});

describe('identity: deployments without an admin token, and with keys required', () => {
  test('without COLLOQUY_ADMIN_TOKEN every admin route is 404', async () => {
    const server = await bootServer();
    try {
      for (const [method, path] of [
        ['POST', '/api/admin/users'],
        ['GET', '/api/admin/users'],
        ['PATCH', '/api/admin/users/x'],
        ['POST', '/api/admin/users/x/keys'],
      ]) {
        const response = await server.fetch(path!, {
          method,
          headers: { authorization: 'Bearer anything', 'content-type': 'application/json' },
          body: method === 'GET' ? undefined : '{}',
        });
        assert.equal(response.status, 404, `${method} ${path}`);
      }
    } finally {
      await server.close();
    }
  });

  test('auth_required refuses anonymous calls to /api/* with 401 but keeps /health open', async () => {
    const server = await bootServer({ config: { auth_required: true }, env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
    try {
      const refused = await server.fetch('/api/chat/quota/me');
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="colloquy"');
      assert.equal((await server.fetch('/health')).status, 200);
      await createUser(server, 'ivan');
      const { key } = await createKey(server, 'ivan');
      assert.equal((await server.fetch('/api/chat/quota/me', { headers: bearer(key) })).status, 200);
    } finally {
      await server.close();
    }
  });
});
