/**
 * Starts the service under test exactly as users do (`node dist/src/cli.js serve`) as a pinned
 * child with a scratch data directory, a silent logger and a config file whose plan is big enough
 * that quota never refuses the load (quota is still reserved and persisted on every request).
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { InspectorSession, inspectorUrlFrom, type ProcessMemory } from './inspector.js';
import type { StreamRequest } from './sse-client.js';
import { freePort, REPO_ROOT, scratchDir, startChild, waitForHttp, type Child } from './harness.js';

/** The id the benchmark config gives the model served by the mock upstream. */
export const MOCK_MODEL_ID = 'mock-gpt';

/** A short chat stream (two deltas, 10 ms apart) whose first delta scenario 5 times beside the N streams it holds. */
export function probeRequest(port: number): StreamRequest {
  return {
    port,
    path: '/api/chat/stream',
    body: { message: 'Probe. [mock chunks=2 interval_ms=10 size=8]', model: MOCK_MODEL_ID },
    dialect: 'colloquy',
  };
}

export interface ColloquyOptions {
  /** Port of a mock OpenAI-compatible upstream to register as model `mock-gpt`. */
  upstreamPort?: number;
  /** Extra config-file keys. */
  config?: Record<string, unknown>;
  /** Models registered beside `mock-gpt` (with `upstreamPort`). */
  extraModels?: Array<Record<string, unknown>>;
  /** Write a V8 CPU profile into this directory on exit (`--cpu-prof`). */
  profileDir?: string;
  /** Open the inspector on a loopback port so the bench can force a GC and read memory. */
  inspect?: boolean;
  /** Another build's cli.js (A/B runs of a change); default dist/src/cli.js of this checkout. */
  cliPath?: string;
  /** Where the scratch data directory goes (default the OS temp dir; /dev/shm takes the disk out). */
  dataParent?: string;
  /** Extra environment for the server (COLLOQUY_ADMIN_TOKEN, …). */
  env?: Record<string, string>;
}

export interface ColloquyServer {
  url: string;
  port: number;
  child: Child;
  pid: number;
  /** Memory after a full GC (only with `inspect`). */
  memoryAfterGc(): Promise<ProcessMemory | undefined>;
  stop(): Promise<void>;
}

/** Boots the server and waits until /health answers. */
export async function startColloquy(options: ColloquyOptions = {}): Promise<ColloquyServer> {
  const scratch = scratchDir('server', options.dataParent);
  const port = await freePort();
  const config: Record<string, unknown> = {
    anonymous_plan: 'bench',
    default_plan: 'bench',
    plans: { bench: { quota: 1_000_000_000, window_seconds: 86_400 } },
    upstream: { retries: 0 },
    // Load comes from one address: the per-caller parallel limit would measure itself, not the path.
    anonymous_max_parallel: 1_000_000,
    ...(options.upstreamPort
      ? {
          models: [
            {
              id: MOCK_MODEL_ID,
              provider: 'openai',
              base_url: `http://127.0.0.1:${options.upstreamPort}/v1`,
              api_key_env: 'BENCH_UPSTREAM_KEY',
              upstream_model: MOCK_MODEL_ID,
            },
            ...(options.extraModels ?? []),
          ],
          default_model: MOCK_MODEL_ID,
        }
      : {}),
    ...options.config,
  };
  const configPath = join(scratch.path, 'config.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  const nodeArgs: string[] = [];
  if (options.profileDir) {
    mkdirSync(options.profileDir, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${options.profileDir}`);
  }
  if (options.inspect) nodeArgs.push('--inspect=127.0.0.1:0');
  const child = startChild(
    'colloquy',
    'server',
    process.execPath,
    [...nodeArgs, options.cliPath ?? join(REPO_ROOT, 'dist/src/cli.js'), 'serve'],
    {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        HOST: '127.0.0.1',
        PORT: String(port),
        COLLOQUY_DATA_DIR: join(scratch.path, 'data'),
        COLLOQUY_CONFIG: configPath,
        LOG_LEVEL: 'silent',
        BENCH_UPSTREAM_KEY: 'sk-bench-loopback',
        NODE_ENV: 'production',
        ...options.env,
      },
    },
  );
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/health`, 20_000, child);
  } catch (error) {
    await child.stop();
    scratch.remove();
    throw error;
  }
  let inspector: InspectorSession | undefined;
  if (options.inspect) {
    const debuggerUrl = inspectorUrlFrom(child.stderr());
    if (!debuggerUrl) throw new Error(`no inspector URL from the server: ${child.stderr()}`);
    inspector = await InspectorSession.open(debuggerUrl);
  }
  return {
    url,
    port,
    child,
    pid: child.pid,
    memoryAfterGc: async () => inspector?.memoryAfterGc(),
    stop: async () => {
      inspector?.close();
      await child.stop();
      scratch.remove();
    },
  };
}

/** POSTs one JSON body and returns status and parsed body (used to probe routes before loading them). */
export async function probe(url: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: response.status, body: parsed };
}
