/**
 * The ingestion thread pool closes cleanly at any moment, including while its ready thread is
 * still loading its module (a server that stops right after it started).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

describe('the ingestion thread pool', () => {
  it('closes without taking the process down while its thread is still loading, whenever the close comes', () => {
    const pool = new URL('../src/rag/worker-pool.js', import.meta.url).href;
    // Pools closed 0 to 99 ms after they were made: some while the thread loads its module.
    const script = `
      const { createPreparer } = await import(${JSON.stringify(pool)});
      for (let delay = 0; delay < 100; delay += 1) {
        const preparer = createPreparer(1);
        await new Promise((resolve) => setTimeout(resolve, delay));
        await preparer.close();
      }
      console.log('closed 100 pools');`;
    const directory = mkdtempSync(join(tmpdir(), 'colloquy-pool-'));
    const file = join(directory, 'close-pools.mjs');
    writeFileSync(file, script);
    const child = spawnSync(process.execPath, [file], { encoding: 'utf8', timeout: 60_000 });
    rmSync(directory, { recursive: true, force: true });
    assert.equal(child.signal, null, child.stderr.slice(0, 400));
    assert.equal(child.status, 0, child.stderr.slice(0, 400));
    assert.match(child.stdout, /closed 100 pools/);
  });
});
