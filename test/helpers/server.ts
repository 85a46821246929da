/**
 * Boots the real server on port 0 with a fresh data directory, for tests that talk HTTP to it.
 *
 * With COLLOQUY_TEST_STORAGE=redis (`npm run test:redis`), every server of the test file stores
 * its state in one real redis-server started for the file, each under its own key prefix derived
 * from its data directory (so a restart on the same directory finds its state again): the storage
 * suites then run unchanged against the Redis engine.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type ConfigFile } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/server.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

let sharedRedis: Promise<RedisServer> | undefined;

/** The test file's redis-server, started at the first use and stopped when the process exits. */
export function testRedis(): Promise<RedisServer> {
  sharedRedis ??= startRedisServer().then((redis) => {
    // Shared by every server of the file: it must not keep the process alive once the tests ended.
    redis.unref();
    process.once('exit', () => redis.kill());
    return redis;
  });
  return sharedRedis;
}

/**
 * The environment that puts a server (or a CLI command) on `dataDir`'s storage: nothing for LMDB;
 * under test:redis the file's Redis and a prefix of the data directory's own.
 */
export async function storageEnv(dataDir: string): Promise<Record<string, string>> {
  if (process.env.COLLOQUY_TEST_STORAGE !== 'redis') return {};
  const redis = await testRedis();
  const prefix = `t${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}:`;
  return { COLLOQUY_REDIS_URL: redis.url, COLLOQUY_REDIS_PREFIX: prefix };
}

/** Where the engine's files are: the data directory, or the Redis's directory under test:redis. */
async function storageDir(dataDir: string): Promise<string> {
  return process.env.COLLOQUY_TEST_STORAGE === 'redis' ? (await testRedis()).dir : dataDir;
}

/** Every file under `dir`. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

export interface TestServer extends RunningServer {
  dataDir: string;
  /** fetch() against the server with a path. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** POSTs JSON and returns the response. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** The files the storage engine writes (LMDB's in the data directory, or Redis's append-only files). */
  storageFiles(): string[];
}

export interface BootOptions {
  /** Config-file keys. */
  config?: ConfigFile;
  /** Extra environment (COLLOQUY_ADMIN_TOKEN, OPENAI_BASE_URL, …); the real process env is not read. */
  env?: Record<string, string>;
  /** Reuse a data directory (to test restarts). */
  dataDir?: string;
  /** "Now" in epoch ms for quota windows (to cross a window edge without waiting). */
  clock?: () => number;
  /** Wraps the quota counters (to slow the durable commit down). */
  wrapQuotaCounters?: StartOptions['wrapQuotaCounters'];
}

/** Starts a server for one test file; call `close()` in `after`. */
export async function bootServer(options: BootOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'colloquy-test-'));
  const engineDir = await storageDir(dataDir);
  const config = loadConfig(
    { HOST: '127.0.0.1', PORT: '0', COLLOQUY_DATA_DIR: dataDir, ...(await storageEnv(dataDir)), ...options.env },
    options.config ?? {},
  );
  const server = await startServer(config, {
    logger: createLogger('silent'),
    clock: options.clock,
    wrapQuotaCounters: options.wrapQuotaCounters,
  });
  const ownsDir = options.dataDir === undefined;
  return {
    ...server,
    dataDir,
    fetch: (path, init) => fetch(server.url + path, init),
    storageFiles: () => filesUnder(engineDir),
    post: (path, body, headers = {}) =>
      fetch(server.url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    close: async () => {
      await server.close();
      if (ownsDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
