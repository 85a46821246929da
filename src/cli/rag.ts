/** `colloquy rag add|list|delete|stats`: the knowledge base on the data directory, like the admin routes. */
import { readFile, stat } from 'node:fs/promises';
import { basename, extname, resolve } from 'node:path';
import { ApiError } from '../errors.js';
import { createKnowledgeBase } from '../rag/create.js';
import { formatFromFileName, type DocumentFormat } from '../rag/extract.js';
import {
  COLLECTION_PATTERN,
  DEFAULT_COLLECTION,
  type DocumentInput,
  IngestFailure,
  type IngestResult,
  type KnowledgeBase,
} from '../rag/knowledge-base.js';
import { CommandError, expectPositionals, parseArgs, table, UsageError, usageOnlyExit } from './args.js';
import { withDataDir } from './data-dir.js';

const RAG_USAGE = `usage:
  colloquy rag add FILE... [--collection NAME] [--json]   index .txt, .md and .html files
  colloquy rag list [--collection NAME] [--limit N] [--json]
  colloquy rag delete DOCUMENT_ID [--json]
  colloquy rag stats [--json]

Re-adding a file (same absolute path, same collection) replaces its earlier version.
`;

const BAR_WIDTH = 28;

interface FileToAdd {
  path: string;
  format: DocumentFormat;
  content: string;
}

/** Reads and checks every file first, so a bad argument indexes nothing. */
async function readFiles(paths: string[], maxBytes: number): Promise<FileToAdd[]> {
  const problems: string[] = [];
  const files: FileToAdd[] = [];
  for (const path of paths) {
    const format = formatFromFileName(path);
    if (!format) {
      problems.push(`${path}: unsupported file type "${extname(path) || '(none)'}" (use .txt, .md or .html)`);
      continue;
    }
    try {
      const info = await stat(path);
      if (!info.isFile()) problems.push(`${path}: not a file`);
      else if (info.size > maxBytes)
        problems.push(`${path}: ${info.size} bytes is over the ${maxBytes}-byte document limit (rag.max_document_bytes)`);
      else files.push({ path, format, content: await readFile(path, 'utf8') });
    } catch (error) {
      problems.push(`${path}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`);
    }
  }
  if (problems.length > 0) throw new CommandError(`nothing was indexed:\n  ${problems.join('\n  ')}`);
  return files;
}

/** A progress reporter: a redrawn bar on a terminal, one plain line per file otherwise. */
function progressReporter(
  files: FileToAdd[],
  json: boolean,
): { update(done: number, total: number, result: IngestResult): void; finish(): void } {
  const tty = process.stderr.isTTY === true && !json;
  let drawn = false;
  return {
    update(done, total, result) {
      const file = files[done - 1]?.path ?? '';
      if (tty) {
        const filled = Math.round((done / total) * BAR_WIDTH);
        const bar = `${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}`;
        const label = basename(file).slice(0, 40);
        process.stderr.write(`\r\u001b[2K[${bar}] ${done}/${total} ${label}`);
        drawn = true;
      } else if (!json) {
        process.stdout.write(`${result.replaced ? 'replaced' : 'indexed'} ${file} -> ${result.document_id} (${result.chunks} chunks)\n`);
      }
    },
    finish() {
      if (drawn) process.stderr.write('\n');
    },
  };
}

async function add(knowledge: KnowledgeBase, files: FileToAdd[], collection: string, json: boolean): Promise<number> {
  const inputs: DocumentInput[] = files.map((file) => ({
    // No title: the document's own <title> or first heading is used, else the file name.
    title: '',
    defaultTitle: basename(file.path, extname(file.path)),
    text: file.content,
    format: file.format,
    collection,
    key: `file:${resolve(file.path)}`,
  }));
  const reporter = progressReporter(files, json);
  let results: IngestResult[];
  try {
    results = await knowledge.addMany(inputs, { batchSize: 16, onProgress: (done, total, result) => reporter.update(done, total, result) });
  } catch (error) {
    reporter.finish();
    if (error instanceof IngestFailure) throw new CommandError(`${files[error.index]?.path ?? 'a file'}: ${describe(error)}`);
    if (error instanceof ApiError) throw new CommandError(describe(error));
    throw error;
  }
  reporter.finish();
  const chunks = results.reduce((sum, result) => sum + result.chunks, 0);
  if (json) process.stdout.write(`${JSON.stringify({ collection, documents: results })}\n`);
  else
    process.stdout.write(
      `indexed ${results.length} document${results.length === 1 ? '' : 's'} (${chunks} chunks) into collection "${collection}"\n`,
    );
  return 0;
}

function describe(error: ApiError): string {
  const details = error.details?.map((detail) => `${detail.path} ${detail.message}`).join('; ');
  return details ? `${error.message} (${details})` : error.message;
}

/** Runs one `rag` subcommand; returns the exit code. */
export async function runRag(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, ['collection', 'limit']);
  const usageExit = usageOnlyExit(sub, args, RAG_USAGE);
  if (usageExit !== undefined) return usageExit;
  const collection = args.options.get('collection');
  if (collection !== undefined && !COLLECTION_PATTERN.test(collection))
    throw new UsageError('--collection must be 1-64 letters, digits, "_" or "-"');
  switch (sub) {
    case 'add': {
      if (args.positionals.length === 0) throw new UsageError('expected at least one FILE');
      return withDataDir(async (data) => {
        const files = await readFiles(args.positionals, data.config.rag.maxDocumentBytes);
        const knowledge = createKnowledgeBase(data.config, data.storage);
        try {
          return await add(knowledge, files, collection ?? DEFAULT_COLLECTION, args.json);
        } finally {
          knowledge.close();
        }
      });
    }
    case 'list': {
      expectPositionals(args, []);
      const limit = Number(args.options.get('limit') ?? '100');
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be an integer from 1 to 10000');
      return withDataDir(async (data) => {
        const knowledge = createKnowledgeBase(data.config, data.storage);
        const documents = knowledge.list({ collection, limit });
        if (args.json) process.stdout.write(`${JSON.stringify({ documents })}\n`);
        else {
          const rows = documents.map((document) => [document.document_id, document.collection, String(document.chunks), document.title]);
          process.stdout.write(table(['DOCUMENT_ID', 'COLLECTION', 'CHUNKS', 'TITLE'], rows));
        }
        return 0;
      });
    }
    case 'delete': {
      const [documentId] = expectPositionals(args, ['DOCUMENT_ID']) as [string];
      return withDataDir(async (data) => {
        const knowledge = createKnowledgeBase(data.config, data.storage);
        if (!knowledge.remove(documentId, collection)) throw new CommandError(`no document ${documentId}`);
        process.stdout.write(args.json ? `${JSON.stringify({ document_id: documentId, deleted: true })}\n` : `deleted ${documentId}\n`);
        return 0;
      });
    }
    case 'stats': {
      expectPositionals(args, []);
      return withDataDir(async (data) => {
        const stats = createKnowledgeBase(data.config, data.storage).stats();
        if (args.json) process.stdout.write(`${JSON.stringify(stats)}\n`);
        else {
          const rows = Object.entries(stats).map(([key, value]) => [
            key,
            typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value),
          ]);
          process.stdout.write(table(['FIELD', 'VALUE'], rows));
        }
        return 0;
      });
    }
    default:
      throw new UsageError(`unknown rag command "${sub}"`);
  }
}
