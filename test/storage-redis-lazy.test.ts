/**
 * The Redis client is loaded only by a node whose engine is Redis: a server on LMDB (the default)
 * answers a chat without ever loading `redis` or its command modules (about 22 MiB and 100 ms of
 * start-up per process). Checked in a process of its own, since this test's own helpers load it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const src = (path: string): string => new URL(`../src/${path}`, import.meta.url).href;

describe('the Redis client is loaded only for the Redis engine', () => {
  test('a server on LMDB answers a chat without loading redis', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-lazy-redis-'));
    const script = `
      import { createRequire } from 'node:module';
      const { loadConfig } = await import(${JSON.stringify(src('config/index.js'))});
      const { startServer } = await import(${JSON.stringify(src('server.js'))});
      const { createLogger } = await import(${JSON.stringify(src('logger.js'))});
      const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', COLLOQUY_DATA_DIR: ${JSON.stringify(dataDir)} }, {});
      const server = await startServer(config, { logger: createLogger('silent') });
      const reply = await fetch(server.url + '/api/chat/', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'What is stored for a session?' }),
      });
      const modules = Object.keys(createRequire(import.meta.url).cache);
      await server.close();
      console.log(JSON.stringify({
        status: reply.status,
        modules: modules.length,
        redis: modules.filter((path) => /node_modules[\\\\/](@redis|redis)[\\\\/]/.test(path)),
        lmdb: modules.some((path) => /node_modules[\\\\/]lmdb[\\\\/]/.test(path)),
      }));
    `;
    try {
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { env: { PATH: process.env.PATH ?? '' } });
      const seen = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
        status: number;
        modules: number;
        redis: string[];
        lmdb: boolean;
      };
      assert.equal(seen.status, 200);
      assert.ok(seen.lmdb, 'the module list is the one the server loaded (lmdb is in it)');
      assert.deepEqual(seen.redis, []);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
