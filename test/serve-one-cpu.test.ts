/**
 * A server confined to one CPU runs in a worker process started with single-threaded garbage
 * collection (V8's helper threads would only take that core from the event loop) and a larger
 * young generation, and still answers, stops on SIGTERM with exit code 0 and leaves nothing listening.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { startServerProcess } from './helpers/server-process.js';

/** The command lines of a process's children (Linux). */
function childCommandLines(pid: number): string[][] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return children.map((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0').filter(Boolean));
}

describe('a server on one CPU', () => {
  test('serves from a worker started with single-threaded garbage collection, and stops on SIGTERM', { timeout: 60_000 }, async () => {
    // taskset (util-linux) confines the process to CPU 0, as a one-CPU machine or container would.
    const server = await startServerProcess({ launcher: ['taskset', '-c', '0'], env: { WORKERS: '1' } });
    let code: number | null = null;
    try {
      const workers = childCommandLines(server.pid as number);
      assert.equal(workers.length, 1, JSON.stringify(workers));
      assert.ok(workers[0]?.includes('--single-threaded-gc'), JSON.stringify(workers));
      assert.ok(workers[0]?.includes('--max-semi-space-size=32'), JSON.stringify(workers));
      assert.equal((await server.post('/api/chat/', { message: 'hello from one CPU' })).status, 200);
    } finally {
      // A failed assertion must not leave the server running either.
      code = await server.close();
    }
    assert.equal(code, 0);
    const refused = await fetch(`${server.url}/health`).then(
      () => false,
      () => true,
    );
    assert.ok(refused, 'nothing listens on the port any more');
  });

  test('leaves the young generation to the operator who sized it in NODE_OPTIONS', { timeout: 60_000 }, async () => {
    const server = await startServerProcess({
      launcher: ['taskset', '-c', '0'],
      env: { WORKERS: '1', NODE_OPTIONS: '--max-semi-space-size=8' },
    });
    try {
      const workers = childCommandLines(server.pid as number);
      assert.equal(workers.length, 1, JSON.stringify(workers));
      assert.ok(!workers[0]?.some((flag) => flag.startsWith('--max-semi-space-size')), JSON.stringify(workers));
      assert.equal((await server.post('/api/chat/', { message: 'hello again' })).status, 200);
    } finally {
      assert.equal(await server.close(), 0);
    }
  });
});
