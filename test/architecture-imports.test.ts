import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

/** The repository root (this file runs from dist/test). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');

interface SourceFile {
  /** Path from the repository root, e.g. `src/core/chat-pipeline.ts`. */
  path: string;
  text: string;
  /** Specifiers as written: relative ones resolved to `src/...ts`, packages and `node:` kept. */
  imports: string[];
}

function walk(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return walk(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT = /^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;
const DYNAMIC_IMPORT = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function readSources(): SourceFile[] {
  return walk(SRC).map((absolute) => {
    const text = readFileSync(absolute, 'utf8');
    const specifiers = [...text.matchAll(IMPORT), ...text.matchAll(DYNAMIC_IMPORT)].map((match) => match[1]!);
    const imports = specifiers.map((specifier) =>
      specifier.startsWith('.') ? relative(ROOT, resolve(dirname(absolute), specifier)).replace(/\.js$/, '.ts') : specifier,
    );
    return { path: relative(ROOT, absolute), text, imports };
  });
}

/** The room a file belongs to: its folder under src, or the file itself at the top. */
function roomOf(path: string): string {
  const parts = path.split('/');
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : path;
}

/** One cycle in a graph, as a list of nodes, or undefined. */
function findCycle(graph: Map<string, Set<string>>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): string[] | undefined => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    if (!state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return undefined;
}

const sources = readSources();
const inside = (file: SourceFile, room: string) => file.path.startsWith(`${room}/`);

describe('the import graph runs downwards only', () => {
  test('the source tree was read (the rules below are not vacuous)', () => {
    assert.ok(sources.length > 50, `read ${sources.length} files`);
    assert.ok(sources.some((file) => file.path === 'src/core/chat-pipeline.ts'));
  });

  test('no file imports itself back through a cycle', () => {
    const graph = new Map(sources.map((file) => [file.path, new Set(file.imports.filter((target) => target.startsWith('src/')))]));
    assert.equal(findCycle(graph)?.join(' -> '), undefined);
  });

  test('no room (a folder under src, or a top-level file) imports another that imports it back', () => {
    const graph = new Map<string, Set<string>>();
    for (const file of sources) {
      const from = roomOf(file.path);
      const targets = graph.get(from) ?? new Set<string>();
      for (const target of file.imports) if (target.startsWith('src/') && roomOf(target) !== from) targets.add(roomOf(target));
      graph.set(from, targets);
    }
    assert.equal(findCycle(graph)?.join(' -> '), undefined);
  });

  test('only src/http imports the uWS binding', () => {
    const offenders = sources.filter((file) => !inside(file, 'src/http') && file.imports.some((target) => target.includes('uws')));
    assert.deepEqual(
      offenders.map((file) => file.path),
      [],
    );
  });

  test('the core and the shared vocabulary know nothing of HTTP', () => {
    const offenders = sources.filter(
      (file) =>
        (inside(file, 'src/core') || inside(file, 'src/domain')) &&
        file.imports.some((target) => target.startsWith('src/http/') || target.startsWith('src/routes/') || target.includes('uws')),
    );
    assert.deepEqual(
      offenders.map((file) => file.path),
      [],
    );
  });

  test('only src/upstream makes HTTP calls to upstreams', () => {
    // HTTP clients; node:net alone (address checks, a free-port probe) makes no HTTP call.
    const network = ['node:http', 'node:https', 'http', 'https', 'undici'];
    const offenders = sources.filter(
      (file) => !inside(file, 'src/upstream') && (file.imports.some((target) => network.includes(target)) || /\bfetch\(/.test(file.text)),
    );
    assert.deepEqual(
      offenders.map((file) => file.path),
      [],
    );
  });

  test('storage engines are opened only in src/store (the knowledge base index is the one room still to move)', () => {
    const stillToMove = new Set(['src/rag/index-store.ts', 'src/rag/ingestion.ts', 'src/rag/migrate.ts', 'src/rag/retrieval-stats.ts']);
    const offenders = sources.filter(
      (file) => !inside(file, 'src/store') && file.imports.some((target) => target === 'lmdb' || target === 'redis'),
    );
    assert.deepEqual(
      offenders.map((file) => file.path).filter((path) => !stillToMove.has(path)),
      [],
    );
  });
});
