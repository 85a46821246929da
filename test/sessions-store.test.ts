import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'sessions-admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

interface SessionBody {
  session_id: string;
  created: string;
  updated: string;
  message_count: number;
  messages: Array<{ role: string; content: string; timestamp: string }>;
}

async function userWithKey(server: TestServer, userId: string): Promise<Record<string, string>> {
  assert.equal((await server.post('/api/admin/users', { user_id: userId }, admin)).status, 201);
  const { key } = (await (await server.post(`/api/admin/users/${userId}/keys`, '', admin)).json()) as { key: string };
  return { authorization: `Bearer ${key}` };
}

describe('sessions: owner-scoped store', () => {
  let server: TestServer;
  let alice: Record<string, string>;
  let bob: Record<string, string>;

  before(async () => {
    server = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN }, config: { session_max_turns: 4 } });
    alice = await userWithKey(server, 'alice');
    bob = await userWithKey(server, 'bob');
  });
  after(() => server.close());

  test('a chat with session_id stores the turns, readable by the owner only', async () => {
    const chatted = await server.post('/api/chat/', { message: 'first question', session_id: 'shared-id' }, alice);
    assert.equal(chatted.status, 200);
    const response = await server.fetch('/api/chat/session/shared-id', { headers: alice });
    assert.equal(response.status, 200);
    const body = (await response.json()) as SessionBody;
    assert.equal(body.session_id, 'shared-id');
    assert.equal(body.message_count, 2);
    assert.deepEqual(
      body.messages.map((message) => message.role),
      ['user', 'assistant'],
    );
    assert.equal(body.messages[0]!.content, 'first question');
    assert.match(body.created, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const foreign = await server.fetch('/api/chat/session/shared-id', { headers: bob });
    assert.equal(foreign.status, 404);
    assert.equal(((await foreign.json()) as { error: { code: string } }).error.code, 'not_found');
    assert.equal((await server.fetch('/api/chat/session/shared-id')).status, 404, 'anonymous callers do not see it either');
  });

  test("another owner can neither append to nor delete someone's session; the same id is their own session", async () => {
    await server.post('/api/chat/', { message: 'alice owns this', session_id: 'mine' }, alice);
    const deleted = await server.fetch('/api/chat/session/mine', { method: 'DELETE', headers: bob });
    assert.equal(deleted.status, 404);
    const bobChat = await server.post('/api/chat/', { message: 'bob writes here', session_id: 'mine' }, bob);
    assert.equal(bobChat.status, 200);

    const aliceView = (await (await server.fetch('/api/chat/session/mine', { headers: alice })).json()) as SessionBody;
    assert.equal(aliceView.message_count, 2);
    assert.ok(aliceView.messages.every((message) => !message.content.includes('bob writes here')));
    const bobView = (await (await server.fetch('/api/chat/session/mine', { headers: bob })).json()) as SessionBody;
    assert.equal(bobView.messages[0]!.content, 'bob writes here');
    assert.ok(bobView.messages.every((message) => !message.content.includes('alice owns this')));
  });

  test('the owner deletes a session: 200 once, then 404', async () => {
    await server.post('/api/chat/', { message: 'to be removed', session_id: 'temp' }, alice);
    const first = await server.fetch('/api/chat/session/temp', { method: 'DELETE', headers: alice });
    assert.equal(first.status, 200);
    assert.deepEqual(await first.json(), { session_id: 'temp', deleted: true });
    assert.equal((await server.fetch('/api/chat/session/temp', { headers: alice })).status, 404);
    assert.equal((await server.fetch('/api/chat/session/temp', { method: 'DELETE', headers: alice })).status, 404);
  });

  test('a session keeps only the newest session_max_turns turns, and reads take a bounded range', async () => {
    for (const message of ['one', 'two', 'three']) {
      assert.equal((await server.post('/api/chat/', { message, session_id: 'capped' }, alice)).status, 200);
    }
    const full = (await (await server.fetch('/api/chat/session/capped', { headers: alice })).json()) as SessionBody;
    assert.equal(full.message_count, 4);
    assert.deepEqual(
      full.messages.filter((message) => message.role === 'user').map((message) => message.content),
      ['two', 'three'],
    );
    const newest = (await (await server.fetch('/api/chat/session/capped?limit=1', { headers: alice })).json()) as SessionBody;
    assert.equal(newest.message_count, 4);
    assert.deepEqual(
      newest.messages.map((message) => message.role),
      ['assistant'],
    );
    assert.equal(newest.messages[0]!.content, full.messages[3]!.content);
    for (const limit of ['0', '5', 'x']) {
      assert.equal((await server.fetch(`/api/chat/session/capped?limit=${limit}`, { headers: alice })).status, 400, limit);
    }
  });

  test('concurrent appends to one session never lose or duplicate a turn', async () => {
    const wide = await bootServer({ config: { session_max_turns: 200 } });
    try {
      await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          wide.services.sessions.append('owner', 'busy', [
            { role: 'user', content: `q${index}`, timestamp: new Date().toISOString() },
            { role: 'assistant', content: `a${index}`, timestamp: new Date().toISOString() },
          ]),
        ),
      );
      const record = await wide.services.sessions.get('owner', 'busy');
      assert.equal(record?.message_count, 80);
      assert.equal(new Set(record?.messages.map((message) => message.content)).size, 80);
      // Each append stays contiguous: a question is directly followed by its own answer.
      for (let index = 0; index < 80; index += 2) {
        assert.equal(record!.messages[index + 1]!.content, `a${record!.messages[index]!.content.slice(1)}`);
      }
    } finally {
      await wide.close();
    }
  });

  test('a malformed session id is invalid_request', async () => {
    const response = await server.fetch(`/api/chat/session/${'x'.repeat(129)}`, { headers: alice });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error: { code: string; details: Array<{ path: string }> } };
    assert.equal(body.error.code, 'invalid_request');
    assert.equal(body.error.details[0]!.path, 'id');
    assert.equal((await server.fetch('/api/chat/session/has%20space', { headers: alice })).status, 400);
  });

  test("GET /api/chat/sessions lists the caller's sessions, most recent first, and nobody else's", async () => {
    const carol = await userWithKey(server, 'carol');
    await server.post('/api/chat/', { message: 'older', session_id: 'c-old' }, carol);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await server.post('/api/chat/', { message: 'newer', session_id: 'c-new' }, carol);
    const list = (await (await server.fetch('/api/chat/sessions', { headers: carol })).json()) as {
      sessions: Array<{ session_id: string; message_count: number; updated: string }>;
    };
    assert.deepEqual(
      list.sessions.map((session) => session.session_id),
      ['c-new', 'c-old'],
    );
    assert.equal(list.sessions[0]!.message_count, 2);
    const limited = (await (await server.fetch('/api/chat/sessions?limit=1', { headers: carol })).json()) as { sessions: unknown[] };
    assert.equal(limited.sessions.length, 1);
    const bobList = (await (await server.fetch('/api/chat/sessions', { headers: bob })).json()) as {
      sessions: Array<{ session_id: string }>;
    };
    assert.ok(bobList.sessions.every((session) => !session.session_id.startsWith('c-')));
  });
});
