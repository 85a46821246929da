import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { bootServer, storageEnv, type TestServer } from './helpers/server.js';

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(dataDir: string, ...args: string[]): Promise<Run> {
  const env = { PATH: process.env.PATH ?? '', COLLOQUY_DATA_DIR: dataDir, ...(await storageEnv(dataDir)) };
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('CLI: users, keys and quota on the data directory', () => {
  let dir: string;
  let server: TestServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'colloquy-cli-'));
  });
  after(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('users add creates a user (exit 0), refuses a duplicate (exit 1) and bad input (exit 2)', async () => {
    const added = await cli(dir, 'users', 'add', 'alice', '--plan', 'pro', '--json');
    assert.equal(added.code, 0, added.stderr);
    const user = JSON.parse(added.stdout) as { user_id: string; plan: string; created: string };
    assert.deepEqual([user.user_id, user.plan], ['alice', 'pro']);

    const duplicate = await cli(dir, 'users', 'add', 'alice');
    assert.equal(duplicate.code, 1);
    assert.match(duplicate.stderr, /user "alice" already exists/);
    const badPlan = await cli(dir, 'users', 'add', 'bob', '--plan', 'gold');
    assert.equal(badPlan.code, 2);
    assert.match(badPlan.stderr, /unknown plan "gold"; configured plans: free, pro/);
    assert.equal((await cli(dir, 'users', 'add', 'me')).code, 2);
    assert.equal((await cli(dir, 'users', 'frobnicate')).code, 2);
    assert.equal((await cli(dir, 'users', 'add')).code, 2);
  });

  test('users list and set-plan show and change plans', async () => {
    assert.equal((await cli(dir, 'users', 'add', 'bob')).code, 0);
    const changed = await cli(dir, 'users', 'set-plan', 'bob', 'pro', '--json');
    assert.equal(changed.code, 0);
    assert.equal((JSON.parse(changed.stdout) as { plan: string }).plan, 'pro');
    assert.equal((await cli(dir, 'users', 'set-plan', 'nobody', 'pro')).code, 1);
    const listed = JSON.parse((await cli(dir, 'users', 'list', '--json')).stdout) as { users: Array<{ user_id: string; plan: string }> };
    assert.deepEqual(
      listed.users.map((item) => [item.user_id, item.plan]),
      [
        ['alice', 'pro'],
        ['bob', 'pro'],
      ],
    );
    const text = (await cli(dir, 'users', 'list')).stdout;
    assert.match(text, /^USER_ID\s+PLAN\s+CREATED\nalice\s+pro\s+\d{4}-/);
  });

  test('a key created by the CLI works against a server on the same data directory; revoking it from the CLI takes effect at once', async () => {
    const created = await cli(dir, 'keys', 'create', 'alice', '--name', 'laptop');
    assert.equal(created.code, 0, created.stderr);
    const key = created.stdout.trim();
    assert.match(key, /^ck_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.match(created.stderr, /shown only now/);

    server = await bootServer({ dataDir: dir });
    const whoami = await server.fetch('/api/chat/quota/me', { headers: { authorization: `Bearer ${key}` } });
    assert.equal(whoami.status, 200);
    assert.deepEqual(((await whoami.json()) as { user_id: string; plan: string }).plan, 'pro');

    const listed = JSON.parse((await cli(dir, 'keys', 'list', 'alice', '--json')).stdout) as {
      keys: Array<{ key_id: string; name: string; revoked: boolean }>;
    };
    assert.equal(listed.keys.length, 1);
    assert.equal(listed.keys[0]!.name, 'laptop');
    assert.ok(!JSON.stringify(listed).includes(key.slice(20)), 'the listing has no secret');

    const revoked = await cli(dir, 'keys', 'revoke', listed.keys[0]!.key_id);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await server.fetch('/api/chat/quota/me', { headers: { authorization: `Bearer ${key}` } })).status, 401);
    assert.equal((await cli(dir, 'keys', 'revoke', '0123456789abcdef')).code, 1);
    assert.equal((await cli(dir, 'keys', 'create', 'nobody')).code, 1);
  });

  test('quota show reports usage counted by the server, as text or JSON', async () => {
    const created = await cli(dir, 'keys', 'create', 'bob', '--json');
    const { key } = JSON.parse(created.stdout) as { key: string };
    for (let index = 0; index < 3; index += 1) {
      assert.equal((await server.post('/api/chat/', { message: 'count me' }, { authorization: `Bearer ${key}` })).status, 200);
    }
    const shown = await cli(dir, 'quota', 'show', 'bob', '--json');
    assert.equal(shown.code, 0, shown.stderr);
    const status = JSON.parse(shown.stdout) as { user_id: string; plan: string; limit: number; used: number; remaining: number };
    assert.deepEqual([status.user_id, status.plan, status.limit, status.used, status.remaining], ['bob', 'pro', 2000, 3, 1997]);
    assert.match((await cli(dir, 'quota', 'show', 'bob')).stdout, /bob\s+pro\s+2000\s+3\s+1997/);
    assert.equal((await cli(dir, 'quota', 'show', 'nobody')).code, 1);
  });
});
