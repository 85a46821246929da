/**
 * Fault suite: the kill -9 loop. 20 rounds of: start the server as its own process, load it with
 * chats from one key (each in its own session), kill it with SIGKILL at a random moment, start it
 * again on the same data directory. Every chat the client saw answered (a 200 with its body) must
 * have its quota unit and its turn stored; the store must open and answer every time (no
 * corruption). Quota taken for chats whose reply never arrived (killed between the durable take
 * and the reply) is reported as overcharge: the contract allows it, never the opposite.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { closedPort } from '../helpers/ports.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const ADMIN = 'kill-loop-admin-token-0123456789';
const ROUNDS = 20;
const CONCURRENCY = 24;

const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-kill-'));
const configPath = join(dataDir, '..', `${dataDir.split('/').pop()}-config.json`);
writeFileSync(configPath, JSON.stringify({ plans: { free: { quota: 1_000_000, window_seconds: 86_400 } }, default_plan: 'free' }));
let child: ChildProcess | undefined;

after(() => {
  child?.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(configPath, { force: true });
});

async function start(port: number): Promise<string> {
  const server = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      COLLOQUY_DATA_DIR: dataDir,
      COLLOQUY_CONFIG: configPath,
      COLLOQUY_ADMIN_TOKEN: ADMIN,
      LOG_LEVEL: 'silent',
    },
    stdio: 'ignore',
  });
  child = server;
  const base = `http://127.0.0.1:${port}`;
  for (let waited = 0; waited < 20_000; waited += 50) {
    const up = await fetch(`${base}/health`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (up) return base;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the server did not start (or its store did not open)');
}

async function kill(): Promise<void> {
  const server = child;
  if (!server) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGKILL');
  await exited;
  child = undefined;
}

describe('kill -9 loop', () => {
  test('20 kills under load lose no acknowledged quota unit and no acknowledged turn', async () => {
    const port = await closedPort();
    let base = await start(port);
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
      await kill();
      running = false;
      await Promise.all(callers);
      base = await start(port);
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
    await kill();
  });
});
