/** Scratch directories for a test file: each made on demand, all removed after every test. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'node:test';

/** A maker of scratch directories named `colloquy-<prefix>-…`, removed after each test of the calling file. */
export function scratchDirectories(prefix: string): () => string {
  const directories: string[] = [];
  afterEach(() => {
    for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
  });
  return () => {
    const directory = mkdtempSync(join(tmpdir(), `colloquy-${prefix}-`));
    directories.push(directory);
    return directory;
  };
}
