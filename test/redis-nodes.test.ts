/**
 * Three server processes on three ports sharing one real redis-server (appendfsync
 * always) act as one service: the quota is exact across the nodes, a key revoked on one node is
 * refused on the others within a second, sessions and the knowledge base are shared. Then Redis is
 * killed (SIGKILL) under load on two nodes: every request still answers within a bound with 200,
 * 429 or 503 `unavailable` (never another 5xx, never a 401), no quota is overspent, /health says
 * 503 `unavailable`, and the nodes serve again by themselves once Redis is back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const ADMIN = 'redis-nodes-admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
/** Every request of the outage test must answer within this many ms. */
const ANSWER_BOUND_MS = 5000;

let redis: RedisServer | undefined;
const nodes: ServerProcess[] = [];

async function userWithKey(node: ServerProcess, userId: string, plan: string): Promise<string> {
  const created = await node.fetch('/api/admin/users', { method: 'POST', headers: admin, body: JSON.stringify({ user_id: userId, plan }) });
  assert.equal(created.status, 201, await created.clone().text());
  const issued = await node.fetch(`/api/admin/users/${userId}/keys`, { method: 'POST', headers: admin });
  assert.equal(issued.status, 201);
  return ((await issued.json()) as { key: string }).key;
}

function chat(node: ServerProcess, key: string, extra: Record<string, unknown> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${node.url}/api/chat/`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ message: 'hello there', ...extra }),
    ...(signal ? { signal } : {}),
  });
}

async function quotaUsed(node: ServerProcess, userId: string): Promise<{ used: number; limit: number }> {
  const response = await node.fetch(`/api/chat/quota/${userId}`, { headers: admin });
  assert.equal(response.status, 200);
  return (await response.json()) as { used: number; limit: number };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

before(async () => {
  redis = await startRedisServer({ appendfsync: 'always' });
  const started = await Promise.all(
    [0, 1, 2].map(() =>
      startServerProcess({
        config: {
          plans: {
            free: { quota: 1_000_000, window_seconds: 86_400 },
            hundred: { quota: 100, window_seconds: 86_400 },
            outage: { quota: 400, window_seconds: 86_400 },
          },
          default_plan: 'free',
        },
        env: { COLLOQUY_ADMIN_TOKEN: ADMIN, COLLOQUY_REDIS_URL: redis?.url ?? '', COLLOQUY_REDIS_PREFIX: 'nodes:' },
      }),
    ),
  );
  nodes.push(...started);
});

after(async () => {
  await Promise.all(nodes.map((node) => node.close()));
  await redis?.close();
});

describe('three nodes on one Redis', () => {
  test('400 concurrent chats over three nodes for a plan of 100: exactly 100 succeed with remaining 0..99', {
    timeout: 60_000,
  }, async () => {
    const key = await userWithKey(nodes[0] as ServerProcess, 'burst', 'hundred');
    const responses = await Promise.all(Array.from({ length: 400 }, (_, index) => chat(nodes[index % 3] as ServerProcess, key)));
    const bodies = await Promise.all(
      responses.map(async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> })),
    );
    const ok = bodies.filter((entry) => entry.status === 200);
    const refused = bodies.filter((entry) => entry.status === 429);
    assert.equal(ok.length, 100);
    assert.equal(refused.length, 300);
    for (const entry of refused) assert.equal((entry.body.error as { code: string }).code, 'quota_exceeded');
    const remaining = ok.map((entry) => entry.body.remaining as number).sort((a, b) => a - b);
    assert.deepEqual(
      remaining,
      Array.from({ length: 100 }, (_, index) => index),
    );
    // Every node granted some of the 100 (the requests were spread round robin over three).
    const grantedBy = [0, 1, 2].map((node) => bodies.filter((entry, index) => index % 3 === node && entry.status === 200).length);
    for (const granted of grantedBy) assert.ok(granted > 0, `grants per node: ${grantedBy.join(', ')}`);
    assert.equal((await quotaUsed(nodes[2] as ServerProcess, 'burst')).used, 100);
  });

  test('a key revoked on node A is refused on A at once and on B and C within a second', { timeout: 30_000 }, async () => {
    const [a, b, c] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const key = await userWithKey(a, 'revoked', 'free');
    const keyId = key.split('_')[1];
    const me = (node: ServerProcess) => node.fetch('/api/chat/quota/me', { headers: { authorization: `Bearer ${key}` } });
    // Every node has the key in its lookup cache.
    for (const node of [a, b, c]) assert.equal((await me(node)).status, 200);
    const deleted = await a.fetch(`/api/admin/users/revoked/keys/${keyId}`, { method: 'DELETE', headers: admin });
    assert.equal(deleted.status, 200);
    const revokedAt = performance.now();
    assert.equal((await me(a)).status, 401);
    const delays: number[] = [];
    for (const node of [b, c]) {
      for (;;) {
        // Measured when asked: a reply's own round trip is not the cache's second.
        const askedAt = performance.now();
        const status = (await me(node)).status;
        if (status === 401) break;
        assert.equal(status, 200);
        assert.ok(askedAt - revokedAt < 1000, 'the key is still accepted a second after its revocation');
        await sleep(20);
      }
      delays.push(Math.round(performance.now() - revokedAt));
    }
    console.log(`revocation seen on B and C after ${delays.join(' ms and ')} ms`);
  });

  test('a session written through A is read and cleared through C, then gone on B', async () => {
    const [a, b, c] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const key = await userWithKey(a, 'talker', 'free');
    const auth = { authorization: `Bearer ${key}` };
    assert.equal((await chat(a, key, { message: 'My name is Ada.', session_id: 'shared-1' })).status, 200);
    const read = await c.fetch('/api/chat/session/shared-1', { headers: auth });
    assert.equal(read.status, 200);
    const session = (await read.json()) as { message_count: number; messages: Array<{ role: string; content: string }> };
    assert.equal(session.message_count, 2);
    assert.equal(session.messages[0]?.content, 'My name is Ada.');
    const cleared = await c.fetch('/api/chat/session/shared-1', { method: 'DELETE', headers: auth });
    assert.equal(cleared.status, 200);
    assert.equal((await b.fetch('/api/chat/session/shared-1', { headers: auth })).status, 404);
  });

  test('a document ingested through B is cited from A', async () => {
    const [a, b] = nodes as [ServerProcess, ServerProcess];
    const ingested = await b.fetch('/api/rag/documents', {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ title: 'Lighthouse rota', text: 'The lighthouse keeper on duty every Tuesday is Marguerite Okonkwo.' }),
    });
    assert.equal(ingested.status, 201, await ingested.clone().text());
    const key = await userWithKey(a, 'reader', 'free');
    const answer = await chat(a, key, { message: 'Who keeps the lighthouse on Tuesday?', rag: true });
    assert.equal(answer.status, 200);
    const body = (await answer.json()) as { response: string; sources: Array<{ kind: string; title: string }> };
    assert.ok(
      body.sources.some((source) => source.kind === 'document' && source.title === 'Lighthouse rota'),
      JSON.stringify(body.sources),
    );
    assert.match(body.response, /Marguerite/);
  });
});

describe('Redis killed under load on two nodes', () => {
  test('every request answers 200, 429 or 503 unavailable in bound; no overspend; the nodes recover by themselves', {
    timeout: 120_000,
  }, async () => {
    const server = redis as RedisServer;
    const [a, b] = nodes as [ServerProcess, ServerProcess];
    // The loaded user runs into its limit of 400; a second user checks that each node serves again.
    const key = await userWithKey(a, 'outage', 'outage');
    const probeKey = await userWithKey(a, 'prober', 'free');
    const statuses = new Map<string, number>();
    const unexpected: string[] = [];
    let ok = 0;
    /** 503s whose command was cut by the kill (sent before it, answered by a closed socket). */
    let cut = 0;
    let slowest = 0;
    let running = true;
    /** When the kill had completed and when Redis was started again (performance.now()). */
    let killedAt = Number.POSITIVE_INFINITY;
    let restartingAt = Number.POSITIVE_INFINITY;
    /** 200s for chats sent after Redis was dead and before it was started again: none may exist. */
    let servedWhileDown = 0;
    const worker = async (node: ServerProcess) => {
      while (running) {
        const started = performance.now();
        try {
          const response = await chat(node, key, {}, AbortSignal.timeout(ANSWER_BOUND_MS));
          const body = (await response.json()) as { error?: { code: string; message?: string } };
          slowest = Math.max(slowest, performance.now() - started);
          const label = response.status === 200 ? '200' : `${response.status} ${body.error?.code ?? '?'}`;
          statuses.set(label, (statuses.get(label) ?? 0) + 1);
          if (response.status === 200) {
            ok += 1;
            // A chat whose take ran before the kill may still finish after it; one sent later may not.
            if (started > killedAt && started < restartingAt) servedWhileDown += 1;
          } else if (response.status === 503 && body.error?.code === 'unavailable') {
            if (!/ECONNREFUSED/.test(body.error.message ?? '')) cut += 1;
            if (!response.headers.get('retry-after')) unexpected.push('503 without Retry-After');
            await sleep(20);
          } else if (response.status === 429 && body.error?.code === 'quota_exceeded') await sleep(20);
          else unexpected.push(label);
        } catch (error) {
          unexpected.push(`no answer: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    };
    const workers = Array.from({ length: 16 }, (_, index) => worker(index % 2 === 0 ? a : b));
    // Load first, then kill Redis once some chats went through (well before the quota runs out).
    const deadline = Date.now() + 20_000;
    while (ok < 40 && Date.now() < deadline) await sleep(2);
    assert.ok(ok >= 40, 'chats were answered before the kill');
    await server.stop({ hard: true });
    killedAt = performance.now();
    const okAtKill = ok;
    await sleep(2000);
    for (const node of [a, b]) {
      const health = await node.fetch('/health', { signal: AbortSignal.timeout(ANSWER_BOUND_MS) });
      assert.equal(health.status, 503);
      const body = (await health.json()) as { status: string; checks: { storage: { ok: boolean; detail?: string } } };
      assert.equal(body.status, 'unavailable');
      assert.equal(body.checks.storage.ok, false);
      assert.ok(body.checks.storage.detail, 'health names the reason');
    }
    const okDuringOutage = ok - okAtKill;
    restartingAt = performance.now();
    await server.start();
    const restartedAt = performance.now();
    // Both nodes serve chats again without a restart of their own.
    const recovered: number[] = [];
    for (const node of [a, b]) {
      for (;;) {
        const response = await chat(node, probeKey, {}, AbortSignal.timeout(ANSWER_BOUND_MS));
        await response.arrayBuffer();
        if (response.status === 200) break;
        assert.equal(response.status, 503);
        assert.ok(performance.now() - restartedAt < 10_000, 'a node did not serve again within 10 s of Redis coming back');
        await sleep(50);
      }
      recovered.push(Math.round(performance.now() - restartedAt));
    }
    // The load goes on until the loaded user's quota is used up (or 20 s pass).
    while ((statuses.get('429 quota_exceeded') ?? 0) < 20 && performance.now() - restartedAt < 20_000) await sleep(10);
    running = false;
    await Promise.all(workers);
    const quota = await quotaUsed(a, 'outage');
    const figures = {
      statuses: Object.fromEntries(statuses),
      ok_before_kill: okAtKill,
      ok_during_outage: okDuringOutage,
      served_while_down: servedWhileDown,
      ok,
      cut_by_the_kill: cut,
      quota_used: quota.used,
      limit: quota.limit,
      overcharge: quota.used - ok,
      slowest_ms: Math.round(slowest),
      serving_again_after_ms: recovered,
    };
    console.log(`Redis outage: ${JSON.stringify(figures)}`);
    assert.deepEqual(unexpected, []);
    assert.equal(servedWhileDown, 0, 'no chat sent while Redis was down was served (it has no quota take)');
    assert.ok((statuses.get('429 quota_exceeded') ?? 0) > 0, 'the load ran into the limit after the restart');
    assert.ok(quota.used <= quota.limit, 'overspent');
    // Every 200 has its unit (appendfsync always). A take Redis ran and wrote to its log just
    // before the kill, whose reply the kill cut, counts without a 200: at most one per cut command.
    assert.ok(quota.used >= ok, 'a unit of an answered chat was lost');
    assert.ok(quota.used - ok <= cut, 'more units counted than chats answered or cut by the kill');
    assert.ok(slowest < ANSWER_BOUND_MS);
    for (const ms of recovered) assert.ok(ms < 5000, `a node took ${ms} ms to serve again`);
    // The processes are still the same ones and still serving.
    for (const node of nodes) assert.equal((await node.fetch('/health')).status, 200);
  });
});
