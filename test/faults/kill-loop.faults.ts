/**
 * Fault suite: the kill -9 loop. 20 rounds of: start the server as its own process, load it with
 * chats from one key (each in its own session), kill it with SIGKILL at a random moment, start it
 * again on the same data directory. Every chat the client saw answered (a 200 with its body) must
 * have its quota unit and its turn stored; the store must open and answer every time (no
 * corruption). Quota taken for chats whose reply never arrived (killed between the durable take
 * and the reply) is reported as overcharge: the contract allows it, never the opposite.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';

const ADMIN = 'kill-loop-admin-token-0123456789';
const ROUNDS = 20;
const CONCURRENCY = 24;

let server: ServerProcess | undefined;
after(async () => {
  await server?.close();
});

describe('kill -9 loop', () => {
  test('20 kills under load lose no acknowledged quota unit and no acknowledged turn', { timeout: 300_000 }, async () => {
    server = await startServerProcess({
      config: { plans: { free: { quota: 1_000_000, window_seconds: 86_400 } }, default_plan: 'free' },
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
    });
    const base = server.url;
    const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
    assert.equal((await fetch(`${base}/api/admin/users`, { method: 'POST', headers: admin, body: '{"user_id":"survivor"}' })).status, 201);
    const { key } = (await (await fetch(`${base}/api/admin/users/survivor/keys`, { method: 'POST', headers: admin })).json()) as {
      key: string;
    };
    const auth = { authorization: `Bearer ${key}` };
    const acknowledged: string[] = [];
    let sent = 0;
    for (let round = 0; round < ROUNDS; round += 1) {
      let running = true;
      const callers = Array.from({ length: CONCURRENCY }, async (_, caller) => {
        for (let turn = 0; running; turn += 1) {
          const session = `r${round}-c${caller}-t${turn}`;
          sent += 1;
          try {
            const response = await fetch(`${base}/api/chat/`, {
              method: 'POST',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({ message: `remember round ${round}`, session_id: session }),
            });
            const body = (await response.json()) as { response?: string };
            // Acknowledged: the status and the whole reply arrived.
            if (response.status === 200 && typeof body.response === 'string') acknowledged.push(session);
          } catch {
            // The server died under this request: not acknowledged.
          }
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 150 + Math.floor(Math.random() * 450)));
      await server.kill();
      running = false;
      await Promise.all(callers);
      await server.restart();
    }
    const quota = (await (await fetch(`${base}/api/chat/quota/me`, { headers: auth })).json()) as { used: number };
    let lostTurns = 0;
    for (const session of acknowledged) {
      const response = await fetch(`${base}/api/chat/session/${session}`, { headers: auth });
      const body = (await response.json()) as { message_count?: number };
      if (response.status !== 200 || (body.message_count ?? 0) < 2) lostTurns += 1;
    }
    const figures = {
      rounds: ROUNDS,
      sent,
      acknowledged: acknowledged.length,
      quota_used: quota.used,
      lost_quota_units: Math.max(0, acknowledged.length - quota.used),
      overcharge: quota.used - acknowledged.length,
      lost_turns: lostTurns,
    };
    console.log(`kill -9 loop: ${JSON.stringify(figures)}`);
    assert.ok(acknowledged.length > ROUNDS, 'chats were answered between the kills');
    assert.equal(lostTurns, 0, 'every acknowledged turn is stored');
    assert.ok(quota.used >= acknowledged.length, 'every acknowledged chat kept its quota unit');
  });
});
