/**
 * A real `redis-server` (Debian's package, installed by scripts/test-setup.sh) on a free loopback
 * port with a scratch directory, for the suites that exercise the Redis engine. Each suite starts
 * its own and stops it by pid; nothing relies on a system service.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closedPort } from './ports.js';

export interface RedisServer {
  /** redis://127.0.0.1:PORT */
  url: string;
  port: number;
  dir: string;
  /** Stops the server (SIGKILL when `hard`, as a crash; SIGTERM otherwise) and waits for its exit; the directory stays. */
  stop(options?: { hard?: boolean }): Promise<void>;
  /** Starts it again on the same port and directory (after stop()). */
  start(): Promise<void>;
  /** Stops it and removes the directory. */
  close(): Promise<void>;
  /** SIGKILL at once, synchronously (for a process 'exit' handler); the directory is removed. */
  kill(): void;
  /** Lets the test process exit while this server runs (then stop it from an 'exit' handler with kill()). */
  unref(): void;
}

export interface RedisServerOptions {
  /** `appendfsync` policy; AOF is on (`appendonly yes`) as docs/deployment.md asks. */
  appendfsync?: 'always' | 'everysec' | 'no';
}

/** Resolves once something accepts TCP connections on the port and answers PING. */
async function waitForPing(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    const answered = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.setTimeout(500);
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.once('error', () => resolve(false));
      socket.once('timeout', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (answered) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'colloquy-redis-'));
  const port = await closedPort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const server = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        options.appendfsync ?? 'always',
        '--maxmemory-policy',
        'noeviction',
        '--protected-mode',
        'no',
      ],
      { stdio: 'ignore' },
    );
    child = server;
    await waitForPing(port, server, 10_000);
  };

  const stop = async (stopOptions: { hard?: boolean } = {}) => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    // Unref'd while it runs; waited for here, so it must hold the event loop open until it exits
    // (else a suite's last `after` ends with its promise pending and the suite is cancelled).
    running.ref();
    running.kill(stopOptions.hard ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    stop,
    start,
    async close() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
    unref() {
      child?.unref();
    },
    kill() {
      child?.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
