/** `colloquy rag add|list|delete|stats`: the knowledge base on the data directory, like the admin routes. */
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, extname, join, resolve } from 'node:path';
import { ApiError } from '../errors.js';
import { createKnowledgeBase } from '../rag/create.js';
import { formatFromFileName, isFileFormat, type DocumentFormat } from '../rag/extract.js';
import { COLLECTION_PATTERN, DEFAULT_COLLECTION, type IngestResult, type KnowledgeBase } from '../rag/knowledge-base.js';
import { CommandError, expectPositionals, parseArgs, table, UsageError, usageOnlyExit } from './args.js';
import { withDataDir } from './data-dir.js';

const RAG_USAGE = `usage:
  colloquy rag add FILE|DIR... [--collection NAME] [--json]   index .txt, .md, .html, .pdf and .docx files
                                                             (directories are walked; other files in them are skipped)
  colloquy rag list [--collection NAME] [--limit N] [--json]
  colloquy rag delete DOCUMENT_ID [--json]
  colloquy rag stats [--json]

Re-adding a file (same absolute path, same collection) replaces its earlier version.
`;

const BAR_WIDTH = 28;
/** Files read and ingested at once. */
const CONCURRENCY = 8;

interface FileToAdd {
  path: string;
  format: DocumentFormat;
  bytes: number;
}

/** Files named on the command line, and the readable files under named directories. */
async function collectFiles(paths: string[], maxBytes: number): Promise<{ files: FileToAdd[]; skipped: number }> {
  const problems: string[] = [];
  const files: FileToAdd[] = [];
  let skipped = 0;
  const walk = async (directory: string): Promise<void> => {
    const entries = await readdir(directory, { withFileTypes: true });
    entries.sort((left, right) => (left.name < right.name ? -1 : 1));
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) {
        const format = formatFromFileName(entry.name);
        const size = format ? (await stat(path)).size : 0;
        if (!format || size > maxBytes) skipped += 1;
        else files.push({ path, format, bytes: size });
      }
    }
  };
  for (const path of paths) {
    try {
      const info = await stat(path);
      if (info.isDirectory()) {
        await walk(path);
        continue;
      }
      const format = formatFromFileName(path);
      if (!format) problems.push(`${path}: unsupported file type "${extname(path) || '(none)'}" (use .txt, .md, .html, .pdf or .docx)`);
      else if (!info.isFile()) problems.push(`${path}: not a file`);
      else if (info.size > maxBytes)
        problems.push(`${path}: ${info.size} bytes is over the ${maxBytes}-byte file limit (rag.max_file_bytes)`);
      else files.push({ path, format, bytes: info.size });
    } catch (error) {
      problems.push(`${path}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`);
    }
  }
  // A mistyped argument indexes nothing: every named file is checked first.
  if (problems.length > 0) throw new CommandError(`nothing was indexed:\n  ${problems.join('\n  ')}`);
  return { files, skipped };
}

/** Progress: a redrawn bar with files and MB/s on a terminal, one plain line per file otherwise. */
function progressReporter(total: number, totalBytes: number, json: boolean) {
  const tty = process.stderr.isTTY === true && !json;
  const started = performance.now();
  let done = 0;
  let bytes = 0;
  let drawn = false;
  const draw = (label: string) => {
    const filled = Math.round((done / Math.max(1, total)) * BAR_WIDTH);
    const seconds = Math.max(0.001, (performance.now() - started) / 1000);
    const rate = (bytes / 1024 ** 2 / seconds).toFixed(1);
    const share = totalBytes > 0 ? Math.round((bytes / totalBytes) * 100) : 100;
    process.stderr.write(
      `\r\u001b[2K[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${done}/${total} files ${share}% ${rate} MB/s ${label.slice(0, 40)}`,
    );
    drawn = true;
  };
  return {
    succeeded(file: FileToAdd, result: IngestResult) {
      done += 1;
      bytes += file.bytes;
      if (tty) draw(basename(file.path));
      else if (!json)
        process.stdout.write(
          `${result.replaced ? 'replaced' : 'indexed'} ${file.path} -> ${result.document_id} (${result.chunks} chunks)\n`,
        );
    },
    failed(file: FileToAdd, message: string) {
      done += 1;
      bytes += file.bytes;
      if (drawn) process.stderr.write('\n');
      drawn = false;
      process.stderr.write(`failed ${file.path}: ${message}\n`);
      if (tty) draw(basename(file.path));
    },
    finish() {
      if (drawn) process.stderr.write('\n');
    },
  };
}

async function add(knowledge: KnowledgeBase, files: FileToAdd[], skipped: number, collection: string, json: boolean): Promise<number> {
  const reporter = progressReporter(
    files.length,
    files.reduce((sum, file) => sum + file.bytes, 0),
    json,
  );
  const results: IngestResult[] = [];
  const failures: Array<{ file: string; error: string }> = [];
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next] as FileToAdd;
      next += 1;
      try {
        const content = isFileFormat(file.format) ? await readFile(file.path) : await readFile(file.path, 'utf8');
        const result = await knowledge.add({
          // No title: the document's own (<title>, first heading, PDF metadata) is used, else the file name.
          title: '',
          defaultTitle: basename(file.path, extname(file.path)),
          name: basename(file.path),
          text: content,
          format: file.format,
          collection,
          key: `file:${resolve(file.path)}`,
        });
        results.push(result);
        reporter.succeeded(file, result);
      } catch (error) {
        const message = error instanceof ApiError ? describe(error) : (error as Error).message;
        failures.push({ file: file.path, error: message });
        reporter.failed(file, message);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, Math.max(1, files.length)) }, worker));
  reporter.finish();
  const chunks = results.reduce((sum, result) => sum + result.chunks, 0);
  if (json) process.stdout.write(`${JSON.stringify({ collection, documents: results, failed: failures, skipped })}\n`);
  else {
    const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;
    const extra = [failures.length > 0 ? `${failures.length} failed` : '', skipped > 0 ? `${plural(skipped, 'file')} skipped` : '']
      .filter(Boolean)
      .join(', ');
    process.stdout.write(
      `indexed ${plural(results.length, 'document')} (${chunks} chunks) into collection "${collection}"${extra ? `; ${extra}` : ''}\n`,
    );
  }
  return failures.length > 0 ? 1 : 0;
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
      if (args.positionals.length === 0) throw new UsageError('expected at least one FILE or DIR');
      return withDataDir(async (data) => {
        const { files, skipped } = await collectFiles(args.positionals, data.config.rag.maxFileBytes);
        const knowledge = createKnowledgeBase(data.config, data.storage);
        try {
          return await add(knowledge, files, skipped, collection ?? DEFAULT_COLLECTION, args.json);
        } finally {
          await knowledge.close();
        }
      });
    }
    case 'list': {
      expectPositionals(args, []);
      const limit = Number(args.options.get('limit') ?? '100');
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be an integer from 1 to 10000');
      return withDataDir(async (data) => {
        const knowledge = createKnowledgeBase(data.config, data.storage, { threads: 0 });
        await knowledge.ready;
        const documents = await knowledge.list({ collection, limit });
        await knowledge.close();
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
        const knowledge = createKnowledgeBase(data.config, data.storage, { threads: 0 });
        await knowledge.ready;
        const removed = await knowledge.remove(documentId, collection);
        await knowledge.close();
        if (!removed) throw new CommandError(`no document ${documentId}`);
        process.stdout.write(args.json ? `${JSON.stringify({ document_id: documentId, deleted: true })}\n` : `deleted ${documentId}\n`);
        return 0;
      });
    }
    case 'stats': {
      expectPositionals(args, []);
      return withDataDir(async (data) => {
        const knowledge = createKnowledgeBase(data.config, data.storage, { threads: 0 });
        await knowledge.ready;
        const stats = await knowledge.stats();
        await knowledge.close();
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
