/**
 * `node dist/bench/request-cpu.js [--against CLI] [--pairs N] [--seconds S] [--only NAME] [--profile]`: the server's CPU per
 * request at a fixed rate, for these loads: scenario 2's built-in chat naming one of 1000
 * sessions, the same chat without a session, scenario 3's chat through the gateway to the
 * loopback mock upstream, on `/api/chat/` and on `/v1/chat/completions`, a streamed chat through
 * it whose 20 deltas come 2 ms apart (what a delta costs on its way through), and the two reference
 * proxies of scenario 3. Each measurement boots a fresh server (pinned like the bench's), sends
 * the request at a fixed rate with autocannon (`overallRate`, 50 connections) for a warm-up of 3 s
 * and then S seconds (default 8), and reads the server's CPU ticks from /proc over the measured
 * part: its main thread, and every thread of its processes.
 *
 * At a fixed rate the server is not saturated, so its CPU per request moves much less between runs
 * than a saturation throughput does: this is the A/B measure of a change. With `--against`, that
 * build's `dist/src/cli.js` and this checkout's run alternately, N pairs (default 4). `--only`
 * keeps the loads whose name contains NAME; `--profile` has each server write a V8 CPU profile
 * into `bench/results/profiles/request-cpu/<load>/` (profiling slows the server: its CPU figures
 * are then not comparable with a run without it).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MOCK_MODEL_ID, startColloquy } from './colloquy.js';
import { processTree, REPO_ROOT, round, scratchDir, startGatewayMock, startNodeHelper, stopAllChildren } from './harness.js';
import { runAutocannon, type LoadResult } from './load.js';

const WARM_UP_SECONDS = 3;
const CONNECTIONS = 50;
const SESSIONS = 1000;
const QUESTION = 'What does Colloquy store for a session?';

interface Shape {
  name: string;
  rate: number;
  upstream: boolean;
  /** The route, `/api/chat/` unless given. */
  path?: string;
  /** Request bodies, sent in rotation. */
  bodies: string[];
  /** Served by bench/bare-proxy.ts instead of the service (the references for the gateway rows), with its quota take or not. */
  bare?: 'plain' | 'quota';
}

const SHAPES: Shape[] = [
  {
    name: 'built-in chat, session',
    rate: 5000,
    upstream: false,
    bodies: Array.from({ length: SESSIONS }, (_, index) =>
      JSON.stringify({ message: QUESTION, model: 'builtin-extractive', session_id: `bench-session-${index}` }),
    ),
  },
  {
    name: 'built-in chat, no session',
    rate: 5000,
    upstream: false,
    bodies: [JSON.stringify({ message: QUESTION, model: 'builtin-extractive' })],
  },
  { name: 'gateway chat', rate: 4000, upstream: true, bodies: [JSON.stringify({ message: 'Say something short.', model: MOCK_MODEL_ID })] },
  {
    name: 'gateway chat /v1',
    rate: 4000,
    upstream: true,
    path: '/v1/chat/completions',
    bodies: [JSON.stringify({ model: MOCK_MODEL_ID, messages: [{ role: 'user', content: 'Say something short.' }] })],
  },
  {
    // Paced deltas, each its own upstream read: what every stage costs per delta of a stream.
    name: 'gateway SSE stream',
    rate: 1000,
    upstream: true,
    path: '/api/chat/stream',
    bodies: [JSON.stringify({ message: 'Stream to me. [mock chunks=20 interval_ms=2 size=8]', model: MOCK_MODEL_ID })],
  },
  {
    name: 'bare proxy (reference)',
    rate: 4000,
    upstream: true,
    bare: 'plain',
    bodies: [JSON.stringify({ message: 'Say something short.', model: MOCK_MODEL_ID })],
  },
  {
    name: 'bare proxy + quota (ref.)',
    rate: 4000,
    upstream: true,
    bare: 'quota',
    bodies: [JSON.stringify({ message: 'Say something short.', model: MOCK_MODEL_ID })],
  },
];

/** CPU ticks (1/100 s) of one thread of a process. */
function threadTicks(pid: number, thread: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${thread}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** Ticks of every thread of a process tree, and of the main thread of its busiest process (the one serving). */
function ticksOf(root: number): { all: number; main: number } {
  let all = 0;
  let main = 0;
  for (const pid of processTree(root)) {
    let process = 0;
    try {
      for (const thread of readdirSync(`/proc/${pid}/task`)) process += threadTicks(pid, Number(thread));
    } catch {
      continue;
    }
    all += process;
    main = Math.max(main, threadTicks(pid, pid));
  }
  return { all, main };
}

function load(url: string, shape: Shape, seconds: number): Promise<LoadResult> {
  return runAutocannon({
    url: `${url}${shape.path ?? '/api/chat/'}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    bodies: shape.bodies,
    connections: CONNECTIONS,
    durationSeconds: seconds,
    rate: shape.rate,
  });
}

async function measure(
  shape: Shape,
  seconds: number,
  cliPath: string | undefined,
  profileDir?: string,
): Promise<{ mainUs: number; allUs: number; requests: number }> {
  const mock = shape.upstream ? await startGatewayMock() : undefined;
  const server = shape.bare
    ? await startBareProxy(mock?.port ?? 0, shape.bare === 'quota', profileDir)
    : await startColloquy({ upstreamPort: mock?.port, cliPath, profileDir });
  try {
    await load(server.url, shape, WARM_UP_SECONDS);
    const before = ticksOf(server.pid);
    const result = await load(server.url, shape, seconds);
    const after = ticksOf(server.pid);
    const { requests } = result;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${shape.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    // A tick is 10 ms: µs per request = ticks × 10,000 / requests.
    return {
      mainUs: round(((after.main - before.main) * 10_000) / requests, 1),
      allUs: round(((after.all - before.all) * 10_000) / requests, 1),
      requests,
    };
  } finally {
    await server.stop();
    await mock?.child.stop();
  }
}

/** bench/bare-proxy.ts in front of the mock, with the handle `measure` needs. */
async function startBareProxy(
  upstreamPort: number,
  quota: boolean,
  profileDir?: string,
): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const flags = profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [];
  const data = quota ? scratchDir('bare-proxy') : undefined;
  const args = ['--upstream', String(upstreamPort), ...(data ? ['--quota', data.path] : [])];
  const { child, port } = await startNodeHelper('bare-proxy', 'server', 'bare-proxy.js', args, undefined, flags);
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      await child.stop();
      data?.remove();
    },
  };
}

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

const against = option('--against');
const pairs = Number(option('--pairs') ?? (against ? 4 : 1));
const seconds = Number(option('--seconds') ?? 8);
const only = option('--only');
const profile = process.argv.includes('--profile');
const shapes = only ? SHAPES.filter((shape) => shape.name.includes(only)) : SHAPES;
const builds: Array<{ label: string; cli: string | undefined }> = against
  ? [
      { label: 'against', cli: against },
      { label: 'this', cli: undefined },
    ]
  : [{ label: 'this', cli: undefined }];

console.log(
  `server CPU per request at a fixed rate; this checkout: ${join(REPO_ROOT, 'dist/src/cli.js')}${against ? `, against: ${against}` : ''}`,
);
try {
  for (let pair = 1; pair <= pairs; pair++) {
    for (const shape of shapes) {
      for (const build of builds) {
        const profileDir = profile
          ? join(REPO_ROOT, 'bench/results/profiles/request-cpu', shape.name.replaceAll(/[^a-z]+/g, '-'))
          : undefined;
        const { mainUs, allUs, requests } = await measure(shape, seconds, build.cli, profileDir);
        console.log(
          `${String(pair).padStart(2)} ${build.label.padEnd(7)} ${shape.name.padEnd(26)} ${String(shape.rate).padStart(5)} req/s  main ${String(mainUs).padStart(6)} µs  all threads ${String(allUs).padStart(6)} µs  (${requests} requests)`,
        );
      }
    }
  }
} finally {
  await stopAllChildren();
}
