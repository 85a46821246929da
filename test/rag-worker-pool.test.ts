/**
 * The ingestion thread pool closes cleanly at any moment, including while its ready thread is
 * still loading its module (a server that stops right after it started), and works in a process
 * started with V8 options (which worker threads cannot be given).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

/** Runs an ES module script in a new Node process with `nodeOptions`; answers its outcome. */
function runScript(script: string, nodeOptions: string[] = []) {
  const directory = mkdtempSync(join(tmpdir(), 'colloquy-pool-'));
  const file = join(directory, 'script.mjs');
  writeFileSync(file, script);
  const child = spawnSync(process.execPath, [...nodeOptions, file], { encoding: 'utf8', timeout: 60_000 });
  rmSync(directory, { recursive: true, force: true });
  return child;
}

const pool = new URL('../src/rag/worker-pool.js', import.meta.url).href;

describe('the ingestion thread pool', () => {
  it('closes without taking the process down while its thread is still loading, whenever the close comes', () => {
    // Pools closed 0 to 99 ms after they were made: some while the thread loads its module.
    const child = runScript(`
      const { createPreparer } = await import(${JSON.stringify(pool)});
      for (let delay = 0; delay < 100; delay += 1) {
        const preparer = createPreparer(1);
        await new Promise((resolve) => setTimeout(resolve, delay));
        await preparer.close();
      }
      console.log('closed 100 pools');`);
    assert.equal(child.signal, null, child.stderr.slice(0, 400));
    assert.equal(child.status, 0, child.stderr.slice(0, 400));
    assert.match(child.stdout, /closed 100 pools/);
  });

  it('extracts and chunks a document in a process started with V8 options', () => {
    const child = runScript(
      `
      const { createPreparer } = await import(${JSON.stringify(pool)});
      const preparer = createPreparer(2);
      const extracted = await preparer.extract({ content: 'Tomatoes are watered daily. Orchids are misted weekly.', format: 'text', name: 'garden.txt' });
      const prepared = await preparer.chunk({ sections: extracted.sections, title: 'Garden', chunkSize: 800, chunkOverlap: 0, stopWords: true });
      await preparer.close();
      console.log(JSON.stringify({ ok: extracted.ok, texts: prepared.content?.texts }));`,
      ['--max-old-space-size=512', '--stack-size=2000'],
    );
    assert.equal(child.status, 0, child.stderr.slice(0, 400));
    assert.deepEqual(JSON.parse(child.stdout), { ok: true, texts: ['Tomatoes are watered daily. Orchids are misted weekly.'] });
  });
});
