/**
 * Boots the real server on port 0 with a fresh data directory, for tests that talk HTTP to it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type ConfigFile } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/server.js';

export interface TestServer extends RunningServer {
  dataDir: string;
  /** fetch() against the server with a path. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** POSTs JSON and returns the response. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
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
  const config = loadConfig({ HOST: '127.0.0.1', PORT: '0', COLLOQUY_DATA_DIR: dataDir, ...options.env }, options.config ?? {});
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
