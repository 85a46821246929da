/** `colloquy rag …` on a data directory, then the server reading what the CLI indexed. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { makeDocx, makePdf, makeScannedPdf } from './helpers/documents.js';
import { bootServer } from './helpers/server.js';

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));
const CORPUS = fileURLToPath(new URL('../../test/fixtures/rag/corpus/', import.meta.url));
const ADMIN = 'rag-cli-admin-token-0123456789';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function colloquy(dataDir: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    // Piped stdout/stderr: not a TTY, so progress comes as plain lines.
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', COLLOQUY_DATA_DIR: dataDir }, timeout: 20_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('colloquy rag', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-rag-cli-'));
  const directories = [dataDir];
  after(() => {
    for (const directory of directories) rmSync(directory, { recursive: true, force: true });
  });
  const files = ['volcanoes.html', 'honeybees.md', 'tides.txt'].map((name) => join(CORPUS, name));

  it('indexes .html, .md and .txt files with one plain progress line each when not on a terminal', async () => {
    const run = await colloquy(dataDir, ['rag', 'add', ...files, '--collection', 'cli']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n');
    assert.equal(lines.length, 4);
    // Files are read and indexed several at a time: a line per file, in the order they finish.
    for (const file of files)
      assert.equal(lines.filter((line) => new RegExp(`^indexed ${file} -> doc_[0-9a-f]{24} \\(1 chunks\\)$`).test(line)).length, 1);
    assert.equal(lines[3], 'indexed 3 documents (3 chunks) into collection "cli"');
    assert.doesNotMatch(run.stderr, /\r/, 'no progress bar without a terminal');
  });

  it('replaces the same files when they are added again', async () => {
    const run = await colloquy(dataDir, ['rag', 'add', files[2]!, '--collection', 'cli', '--json']);
    assert.equal(run.code, 0, run.stderr);
    const body = JSON.parse(run.stdout) as { documents: Array<{ replaced: boolean; title: string }> };
    assert.deepEqual(
      body.documents.map((document) => [document.title, document.replaced]),
      [['tides', true]],
    );
  });

  it('refuses unsupported or missing files and indexes none of the batch', async () => {
    const run = await colloquy(dataDir, [
      'rag',
      'add',
      join(CORPUS, 'sleep.md'),
      join(CORPUS, 'nothing-here.txt'),
      '/etc/hostname',
      '--collection',
      'cli',
    ]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /nothing-here\.txt: no such file/);
    assert.match(run.stderr, /hostname: unsupported file type/);
    const list = await colloquy(dataDir, ['rag', 'list', '--json']);
    assert.equal((JSON.parse(list.stdout) as { documents: unknown[] }).documents.length, 3);
  });

  it('names the file it failed on when a document cannot be indexed', async () => {
    const empty = join(dataDir, 'empty-notes.md');
    writeFileSync(empty, '   \n\n  ');
    const run = await colloquy(dataDir, ['rag', 'add', files[0]!, empty, '--collection', 'cli']);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /empty-notes\.md: /);
  });

  it('walks a directory: PDF and Word files go in with the rest, other files are skipped, an unreadable one is named', async () => {
    // A data directory of its own: the tests below count the documents of the shared one.
    const libraryData = mkdtempSync(join(tmpdir(), 'colloquy-rag-cli-dir-'));
    directories.push(libraryData);
    const tree = join(libraryData, 'library');
    mkdirSync(join(tree, 'nested'), { recursive: true });
    writeFileSync(
      join(tree, 'manual.pdf'),
      makePdf(['Setup\nPlug the kettle in.', 'Cleaning\nDescale the kettle monthly.'], { title: 'Kettle manual' }),
    );
    writeFileSync(join(tree, 'nested', 'policy.docx'), makeDocx(['Kitchen policy', 'Wash your own mug.']));
    writeFileSync(join(tree, 'nested', 'notes.md'), '# Notes\n\nThe fridge is cleared on Fridays.');
    writeFileSync(join(tree, 'photo.png'), Buffer.from([137, 80, 78, 71]));
    writeFileSync(join(tree, 'scan.pdf'), makeScannedPdf());
    const run = await colloquy(libraryData, ['rag', 'add', tree, '--collection', 'library', '--json']);
    assert.equal(run.code, 1, 'one file could not be read');
    const body = JSON.parse(run.stdout) as {
      documents: Array<{ title: string; chunks: number }>;
      failed: Array<{ file: string; error: string }>;
      skipped: number;
    };
    assert.deepEqual(body.documents.map((document) => document.title).sort(), ['Kettle manual', 'Notes', 'policy']);
    assert.equal(body.skipped, 1);
    assert.deepEqual(
      body.failed.map((failure) => failure.file),
      [join(tree, 'scan.pdf')],
    );
    assert.match(body.failed[0]?.error ?? '', /no extractable text/);
    assert.match(run.stderr, /failed .*scan\.pdf: scan\.pdf has no extractable text/);
  });

  it('answers a usage mistake with exit code 2', async () => {
    assert.equal((await colloquy(dataDir, ['rag', 'add'])).code, 2);
    assert.equal((await colloquy(dataDir, ['rag', 'add', files[0]!, '--collection', 'bad name'])).code, 2);
  });

  it('leaves documents the server lists, titled from the page, the heading or the file name', async () => {
    const server = await bootServer({ dataDir, env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
    try {
      const response = await server.fetch('/api/rag/documents?collection=cli', { headers: { authorization: `Bearer ${ADMIN}` } });
      const body = (await response.json()) as { documents: Array<{ title: string }> };
      assert.deepEqual(body.documents.map((document) => document.title).sort(), ['How honeybees share directions', 'Mount Etna', 'tides']);
      const passages = await server.services.knowledge.retrieve('waggle dance distance', { topK: 1, collection: 'cli' });
      assert.equal(passages[0]?.title, 'How honeybees share directions');
    } finally {
      await server.close();
    }
  });

  it('deletes a document and reports the stats', async () => {
    const list = JSON.parse((await colloquy(dataDir, ['rag', 'list', '--json'])).stdout) as { documents: Array<{ document_id: string }> };
    const id = list.documents[0]!.document_id;
    assert.equal((await colloquy(dataDir, ['rag', 'delete', id])).code, 0);
    assert.equal((await colloquy(dataDir, ['rag', 'delete', id])).code, 1);
    const stats = JSON.parse((await colloquy(dataDir, ['rag', 'stats', '--json'])).stdout) as { documents: number; queries: number };
    assert.equal(stats.documents, 2);
    assert.equal(stats.queries, 1, 'the query the server ran was persisted when it closed');
  });
});
