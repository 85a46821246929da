/**
 * A redis-server for the benchmark (Debian's package, as the tests use): a free loopback port, a
 * scratch directory, AOF on with the asked `appendfsync` policy, pinned to the server core (it is
 * part of the service under test) and stopped by pid with the benchmark's other children.
 */
import { execFileSync } from 'node:child_process';
import { freePort, scratchDir, sleep, startChild } from './harness.js';

export interface BenchRedis {
  url: string;
  stop(): Promise<void>;
}

/** Whether redis-server is installed. */
export function hasRedisServer(): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v redis-server'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function startBenchRedis(appendfsync: 'always' | 'everysec'): Promise<BenchRedis> {
  const scratch = scratchDir('redis');
  const port = await freePort();
  const child = startChild('redis-server', 'server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    scratch.path,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    appendfsync,
    '--maxmemory-policy',
    'noeviction',
    '--protected-mode',
    'no',
  ]);
  const url = `redis://127.0.0.1:${port}`;
  for (let waited = 0; ; waited += 50) {
    if (child.process.exitCode !== null) throw new Error(`redis-server exited: ${child.stderr()}`);
    try {
      execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'ignore' });
      break;
    } catch {
      if (waited > 10_000) throw new Error('redis-server did not answer');
      await sleep(50);
    }
  }
  return {
    url,
    stop: async () => {
      await child.stop();
      scratch.remove();
    },
  };
}
