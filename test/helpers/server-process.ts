/**
 * The server as its own process (`node dist/src/cli.js serve`) on a loopback port, for the fault
 * suites: its event loop is then its own, so the delay read from its /metrics is the server's
 * alone, and it can be killed with SIGKILL and started again on the same data directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closedPort } from './ports.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));

export interface ServerProcessOptions {
  /** Config-file keys. */
  config?: Record<string, unknown>;
  /** Extra environment (COLLOQUY_ADMIN_TOKEN, …). */
  env?: Record<string, string>;
  /** A command Node runs under, e.g. `['taskset', '-c', '0']` for one CPU. */
  launcher?: string[];
}

export interface ServerProcess {
  url: string;
  port: number;
  dataDir: string;
  /** The process started last (under a launcher that execs, Node's own). */
  readonly pid: number | undefined;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** The server's event-loop delay since the previous call, from its /metrics (prom-client resets it on each scrape). */
  eventLoopDelay(): Promise<{ p99_ms: number; max_ms: number }>;
  /** SIGKILL, then wait for the exit. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and data directory (after kill()). */
  restart(): Promise<void>;
  /** SIGTERM, wait for the exit, remove the data directory; answers the exit code. */
  close(): Promise<number | null>;
}

export async function startServerProcess(options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-process-'));
  const configPath = join(dataDir, 'config.json');
  writeFileSync(configPath, JSON.stringify(options.config ?? {}));
  const port = await closedPort();
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;

  const launch = async () => {
    const [command, ...launcherArgs] = [...(options.launcher ?? []), process.execPath];
    const server = spawn(command as string, [...launcherArgs, CLI, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOST: '127.0.0.1',
        PORT: String(port),
        COLLOQUY_DATA_DIR: join(dataDir, 'data'),
        COLLOQUY_CONFIG: configPath,
        LOG_LEVEL: 'silent',
        ...options.env,
      },
      stdio: 'ignore',
    });
    child = server;
    for (let waited = 0; waited < 20_000; waited += 50) {
      const up = await fetch(`${url}/health`).then(
        (response) => response.status === 200,
        () => false,
      );
      if (up) return;
      if (server.exitCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the server process did not start (or its store did not open)');
  };

  const stop = async (signal: NodeJS.Signals): Promise<number | null> => {
    const server = child;
    if (!server || server.exitCode !== null) return server?.exitCode ?? null;
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    server.kill(signal);
    const code = await exited;
    child = undefined;
    return code;
  };

  await launch();
  return {
    url,
    port,
    dataDir,
    get pid() {
      return child?.pid;
    },
    fetch: (path, init) => fetch(url + path, init),
    post: (path, body, headers = {}) =>
      fetch(url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    eventLoopDelay: async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      const value = (name: string) => {
        const seconds = Number(new RegExp(`^colloquy_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
        return Math.round(seconds * 10_000) / 10;
      };
      return { p99_ms: value('p99'), max_ms: value('max') };
    },
    kill: async () => {
      await stop('SIGKILL');
    },
    restart: launch,
    close: async () => {
      const code = await stop('SIGTERM');
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}
