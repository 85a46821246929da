/**
 * `colloquy storage copy --from SOURCE --to TARGET`: copies everything a deployment stores (users,
 * API keys, quota counters, sessions, usage history and the knowledge base) from one engine to
 * another. SOURCE and TARGET are each a data directory (LMDB) or a redis:// / rediss:// URL. Each
 * store is read in pages and written record by record, so memory stays bounded whatever the size.
 * A target that already holds a user, key, session or document is refused without --force, so two
 * deployments are never merged by accident.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig, type Config } from '../config/index.js';
import { createKnowledgeBase } from '../rag/create.js';
import type { KnowledgeBase } from '../rag/knowledge-base.js';
import { LmdbStorage } from '../store/lmdb.js';
import { storesOn, type OpenedStorage } from '../store/open.js';
import { RedisStorage } from '../store/redis.js';
import type { RecordTransfer } from '../store/types.js';
import { CommandError, expectPositionals, parseArgs, UsageError, usageOnlyExit } from './args.js';

const STORAGE_USAGE = `usage:
  colloquy storage copy --from SOURCE --to TARGET [--from-prefix PREFIX] [--to-prefix PREFIX] [--force] [--json]

SOURCE and TARGET are each a data directory (LMDB) or a redis:// or rediss:// URL; the prefixes
are the Redis key prefixes (default "colloquy:"). Copies users, API keys, quota counters, sessions,
the usage history and the knowledge base. A target that already holds a user, API key, session or
document is refused unless --force is given (records with the same identity are then replaced).
Stop the servers on both sides first.
`;

const DEFAULT_PREFIX = 'colloquy:';
const BAR_WIDTH = 28;
/** How often a terminal's progress line is redrawn at most. */
const REDRAW_MS = 100;

/** One side of a copy, as named on the command line. */
interface Endpoint {
  kind: 'lmdb' | 'redis';
  /** The data directory (absolute), or the URL. */
  location: string;
  prefix: string;
  /** How messages name it (a URL without its password). */
  label: string;
}

/** One side opened: its engine, stores and knowledge base. */
interface OpenedSide {
  stores: OpenedStorage;
  knowledge: KnowledgeBase;
}

/** A kind of record and how it moves. */
interface Step {
  name: string;
  records: (side: OpenedSide) => AsyncIterable<unknown>;
  write: (side: OpenedSide, record: unknown) => Promise<unknown>;
}

/** A store's export and import, as one step. */
function storeStep<T>(name: string, pick: (stores: OpenedStorage) => RecordTransfer<T>): Step {
  return {
    name,
    records: (side) => pick(side.stores).exportRecords(),
    write: (side, record) => pick(side.stores).importRecord(record as T),
  };
}

/** What is copied, in order: owners before what they own. */
const STEPS: Step[] = [
  storeStep('users', (stores) => stores.users),
  storeStep('API keys', (stores) => stores.apiKeys),
  storeStep('quota counters', (stores) => stores.counters),
  storeStep('sessions', (stores) => stores.sessions),
  storeStep('usage records', (stores) => stores.usage),
  {
    name: 'documents',
    records: (side) => side.knowledge.exportDocuments(),
    write: (side, record) => side.knowledge.importDocument(record as Parameters<KnowledgeBase['importDocument']>[0]),
  },
];

/** A URL with its password (if any) hidden. */
function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

function endpoint(spec: string, prefix: string | undefined): Endpoint {
  if (/^rediss?:\/\//.test(spec)) {
    const keyPrefix = prefix ?? DEFAULT_PREFIX;
    return { kind: 'redis', location: spec, prefix: keyPrefix, label: `${redacted(spec)} (prefix "${keyPrefix}")` };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) throw new UsageError(`"${spec}" is neither a data directory nor a redis:// or rediss:// URL`);
  if (prefix !== undefined) throw new UsageError('a key prefix only applies to a Redis URL');
  const location = resolve(spec);
  return { kind: 'lmdb', location, prefix: '', label: location };
}

/** Opens one side's engine; a Redis that cannot be reached or a source directory that does not exist is a CommandError. */
async function openEngine(side: Endpoint, role: 'source' | 'target'): Promise<LmdbStorage | RedisStorage> {
  if (side.kind === 'lmdb') {
    if (role === 'source' && !existsSync(join(side.location, 'data.mdb')))
      throw new CommandError(`the source data directory ${side.location} does not exist (no data.mdb in it)`);
    return new LmdbStorage(side.location);
  }
  const storage = await RedisStorage.open({ url: side.location, keyPrefix: side.prefix, commandTimeoutMs: 10_000, connectTimeoutMs: 3000 });
  const health = await storage.check();
  if (!health.ok) {
    await storage.close();
    throw new CommandError(`cannot reach the ${role} Redis at ${redacted(side.location)}: ${health.detail ?? 'no answer'}`);
  }
  return storage;
}

async function openSide(config: Readonly<Config>, side: Endpoint, role: 'source' | 'target'): Promise<OpenedSide> {
  const storage = await openEngine(side, role);
  const knowledge = createKnowledgeBase(config, storage, { threads: 0 });
  try {
    await knowledge.ready;
  } catch (error) {
    await knowledge.close().catch(() => undefined);
    await storage.close();
    throw error;
  }
  return { stores: storesOn(storage, config), knowledge };
}

async function closeSide(side: OpenedSide | undefined): Promise<void> {
  if (!side) return;
  await side.knowledge.close().catch(() => undefined);
  await side.stores.storage.close();
}

/** True when the iterable yields anything (it is closed after the first record). */
async function anyRecord(records: AsyncIterable<unknown>): Promise<boolean> {
  for await (const _record of records) return true;
  return false;
}

/** What the target already holds that makes it non-empty (a user, key, session or document), or undefined. */
async function firstHeld(target: OpenedSide): Promise<string | undefined> {
  if (await anyRecord(target.stores.users.exportRecords())) return 'users';
  if (await anyRecord(target.stores.apiKeys.exportRecords())) return 'API keys';
  if (await anyRecord(target.stores.sessions.exportRecords())) return 'sessions';
  if ((await target.knowledge.list({ limit: 1 })).length > 0) return 'documents';
  return undefined;
}

/** "1 user", "3 users" (every kind's name is a plural in s). */
function counted(count: number, name: string): string {
  return `${count} ${count === 1 ? name.slice(0, -1) : name}`;
}

/** Progress on stderr: a redrawn bar with each kind's count on a terminal, one line per finished kind otherwise. */
function progressReporter(json: boolean) {
  const tty = process.stderr.isTTY === true && !json;
  const counts = new Map<string, number>();
  let finished = 0;
  let drawnAt = 0;
  const draw = () => {
    drawnAt = performance.now();
    const filled = Math.round((finished / STEPS.length) * BAR_WIDTH);
    const parts = [...counts].map(([name, count]) => `${name} ${count}`).join(', ');
    process.stderr.write(`\r\u001b[2K[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${finished}/${STEPS.length} ${parts}`);
  };
  return {
    copied(name: string) {
      counts.set(name, (counts.get(name) ?? 0) + 1);
      if (tty && performance.now() - drawnAt >= REDRAW_MS) draw();
    },
    done(name: string) {
      finished += 1;
      if (!counts.has(name)) counts.set(name, 0);
      if (tty) draw();
      else if (!json) process.stderr.write(`copied ${counted(counts.get(name) ?? 0, name)}\n`);
    },
    finish() {
      if (tty && drawnAt > 0) process.stderr.write('\n');
    },
    counts,
  };
}

/** Copies every step's records from `source` to `target`; the count of each kind. */
async function copyAll(source: OpenedSide, target: OpenedSide, json: boolean): Promise<Map<string, number>> {
  const progress = progressReporter(json);
  try {
    for (const step of STEPS) {
      for await (const record of step.records(source)) {
        await step.write(target, record);
        progress.copied(step.name);
      }
      progress.done(step.name);
    }
  } finally {
    progress.finish();
  }
  await target.knowledge.settle();
  await target.stores.storage.flush();
  return progress.counts;
}

function failureMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function copy(from: Endpoint, to: Endpoint, force: boolean, json: boolean): Promise<number> {
  if (from.kind === to.kind && from.location === to.location && from.prefix === to.prefix)
    throw new UsageError('--from and --to name the same storage');
  const config = loadConfig();
  let source: OpenedSide | undefined;
  let target: OpenedSide | undefined;
  try {
    source = await openSide(config, from, 'source');
    target = await openSide(config, to, 'target');
    const held = force ? undefined : await firstHeld(target);
    if (held !== undefined)
      throw new CommandError(`the target ${to.label} is not empty (it holds ${held}); copy into an empty one, or pass --force to merge`);
    const counts = await copyAll(source, target, json);
    const copied = Object.fromEntries(counts);
    if (json) process.stdout.write(`${JSON.stringify({ from: from.label, to: to.label, copied })}\n`);
    else {
      const summary = [...counts].map(([name, count]) => counted(count, name)).join(', ');
      process.stdout.write(`copied ${summary} from ${from.label} to ${to.label}\n`);
    }
    // An empty source is most often a mistyped prefix or directory: say so, without failing.
    if ([...counts.values()].every((count) => count === 0))
      process.stderr.write(`colloquy: note: the source ${from.label} holds no records\n`);
    return 0;
  } catch (error) {
    if (error instanceof CommandError || error instanceof UsageError) throw error;
    throw new CommandError(`copy from ${from.label} to ${to.label} failed: ${failureMessage(error)}`);
  } finally {
    await closeSide(target);
    await closeSide(source);
  }
}

/** Runs one `storage` subcommand; returns the exit code. */
export async function runStorage(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const force = rest.includes('--force');
  const args = parseArgs(
    rest.filter((arg) => arg !== '--force'),
    ['from', 'to', 'from-prefix', 'to-prefix'],
  );
  const usageExit = usageOnlyExit(sub, args, STORAGE_USAGE);
  if (usageExit !== undefined) return usageExit;
  switch (sub) {
    case 'copy': {
      expectPositionals(args, []);
      const from = args.options.get('from');
      const to = args.options.get('to');
      if (from === undefined || to === undefined) throw new UsageError('copy needs --from SOURCE and --to TARGET');
      return copy(endpoint(from, args.options.get('from-prefix')), endpoint(to, args.options.get('to-prefix')), force, args.json);
    }
    default:
      throw new UsageError(`unknown storage command "${sub}"`);
  }
}
