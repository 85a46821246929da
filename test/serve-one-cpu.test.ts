/**
 * A server confined to one CPU runs in a worker process started with single-threaded garbage
 * collection (V8's helper threads would only take that core from the event loop), and still
 * answers, stops on SIGTERM with exit code 0 and leaves nothing listening.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-one-cpu-'));

after(() => rmSync(dataDir, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });
}

/** The command lines of a process's children (Linux). */
function childCommandLines(pid: number): string[][] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return children.map((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0').filter(Boolean));
}

describe('a server on one CPU', () => {
  test('serves from a worker started with single-threaded garbage collection, and stops on SIGTERM', { timeout: 60_000 }, async () => {
    const port = await freePort();
    // taskset (util-linux) confines the process to CPU 0, as a one-CPU machine or container would.
    const server = spawn('taskset', ['-c', '0', process.execPath, join(ROOT, 'dist/src/cli.js'), 'serve'], {
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', COLLOQUY_DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKERS: '1' },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((done) => server.once('exit', (code) => done(code)));
    try {
      const base = `http://127.0.0.1:${port}`;
      let up = false;
      for (let waited = 0; waited < 30_000 && !up; waited += 100) {
        up = await fetch(`${base}/health`).then(
          (response) => response.ok,
          () => false,
        );
        if (!up) await new Promise((done) => setTimeout(done, 100));
      }
      assert.ok(up, 'the server answered /health');
      const workers = childCommandLines(server.pid as number);
      assert.equal(workers.length, 1, JSON.stringify(workers));
      assert.ok(workers[0]?.includes('--single-threaded-gc'), JSON.stringify(workers));
      const chat = await fetch(`${base}/api/chat/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'hello from one CPU' }),
      });
      assert.equal(chat.status, 200);

      server.kill('SIGTERM');
      assert.equal(await exited, 0);
      const refused = await fetch(`${base}/health`).then(
        () => false,
        () => true,
      );
      assert.ok(refused, 'nothing listens on the port any more');
    } finally {
      // A failed assertion must not leave the server running.
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    }
  });
});
