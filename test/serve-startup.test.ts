import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bootServer } from './helpers/server.js';

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), '../src/cli.js');
const scratch = mkdtempSync(join(tmpdir(), 'colloquy-startup-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs `colloquy serve` with the environment given until it exits (or 15 s): its exit code and stderr. */
function serve(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, 'serve'], {
      env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'silent', COLLOQUY_DATA_DIR: join(scratch, 'data'), ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    const limit = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', (code) => {
      clearTimeout(limit);
      done({ code, stderr });
    });
  });
}

/** One line, naming what is wrong, with no stack trace. */
function assertOneLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, got: ${stderr}`);
  assert.match(lines[0] ?? '', pattern);
  assert.doesNotMatch(stderr, /\n\s+at |Error:/);
}

describe('start-up failures: one clear line and exit code 1 (78 for configuration)', () => {
  test('a separate server on a busy port refuses to start instead of sharing it', async () => {
    const running = await bootServer();
    try {
      const result = await serve({ PORT: String(running.port) });
      assert.equal(result.code, 1);
      assertOneLine(result.stderr, new RegExp(`port ${running.port} is in use`));
      // The first server is untouched and still the only one answering.
      assert.equal((await running.fetch('/health')).status, 200);
    } finally {
      await running.close();
    }
  });

  test('an unwritable data directory is one line naming the cause', async () => {
    const file = join(scratch, 'not-a-directory');
    writeFileSync(file, 'x');
    const result = await serve({ PORT: '0', COLLOQUY_DATA_DIR: join(file, 'data') });
    assert.equal(result.code, 1);
    assertOneLine(result.stderr, /could not start: ENOTDIR/);
  });

  test('a bad config file is one line naming the key, exit 78', async () => {
    const config = join(scratch, 'bad.json');
    writeFileSync(config, JSON.stringify({ plans: { free: { quota: 'many' } } }));
    const result = await serve({ PORT: '0', COLLOQUY_CONFIG: config });
    assert.equal(result.code, 78);
    assert.match(result.stderr, /plans\.free\.quota/);
    assert.doesNotMatch(result.stderr, /\n\s+at /);
  });
});
