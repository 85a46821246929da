/**
 * Shared benchmark plumbing: CPU placement, child processes started and stopped by pid, free
 * ports, readiness polling, RSS sampling, percentiles, tables and the machine description that
 * every result carries.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem, release } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (dist/bench/harness.js → ../..). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Compiled bench entry points live next to this file. */
export const BENCH_DIST = fileURLToPath(new URL('./', import.meta.url));

/** Which core runs what: the server under test alone on one, load generators (and mocks) on another. */
interface Placement {
  pinned: boolean;
  serverCpu: number | undefined;
  loadCpu: number | undefined;
  note: string;
}

let cachedPlacement: Placement | undefined;

function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Decides the core layout once: pinned when taskset exists and there are at least two cores. */
function placement(): Placement {
  if (cachedPlacement) return cachedPlacement;
  const count = cpus().length;
  if (count >= 2 && process.platform === 'linux' && hasCommand('taskset')) {
    const loadCpu = count - 1;
    cachedPlacement = {
      pinned: true,
      serverCpu: 0,
      loadCpu,
      note: `taskset: server under test on cpu 0; load generator, clients and mock upstream on cpu ${loadCpu}`,
    };
  } else {
    cachedPlacement = { pinned: false, serverCpu: undefined, loadCpu: undefined, note: 'not pinned (taskset missing or a single core)' };
  }
  return cachedPlacement;
}

/** Pins the current process (the runner, which also acts as a client) to the load core. */
export function pinSelfToLoadCpu(): void {
  const layout = placement();
  if (!layout.pinned) return;
  try {
    execFileSync('taskset', ['-cp', String(layout.loadCpu), String(process.pid)], { stdio: 'ignore' });
  } catch {
    // Not fatal: the figures are still ratios from one run, only noisier.
  }
}

/** Prefixes a command with taskset for the given role. */
function pinnedCommand(role: 'server' | 'load', command: string, args: string[]): [string, string[]] {
  const layout = placement();
  const cpu = role === 'server' ? layout.serverCpu : layout.loadCpu;
  if (!layout.pinned || cpu === undefined) return [command, args];
  return ['taskset', ['-c', String(cpu), command, ...args]];
}

/** A child process the benchmark started and will stop by its pid. */
export interface Child {
  name: string;
  process: ChildProcess;
  pid: number;
  /** Everything it wrote to stderr (bounded), for error reports. */
  stderr(): string;
  stop(): Promise<void>;
}

const running = new Set<Child>();
const unexpectedExits: string[] = [];

/** Returns (and forgets) the servers that died on their own since the last call. */
export function takeUnexpectedExits(): string[] {
  return unexpectedExits.splice(0);
}

/** Starts a child with output captured; `onLine` sees each stdout line. */
export function startChild(
  name: string,
  role: 'server' | 'load',
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; onLine?: (line: string) => void } = {},
): Child {
  const [cmd, cmdArgs] = pinnedCommand(role, command, args);
  const child = spawn(cmd, cmdArgs, { env: options.env ?? process.env, cwd: options.cwd ?? REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  let errText = '';
  let outBuffer = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (text: string) => {
    outBuffer += text;
    for (let newline = outBuffer.indexOf('\n'); newline >= 0; newline = outBuffer.indexOf('\n')) {
      const line = outBuffer.slice(0, newline);
      outBuffer = outBuffer.slice(newline + 1);
      options.onLine?.(line);
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => {
    errText = (errText + text).slice(-8000);
  });
  let stopping = false;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code, signal) => {
    // A server that dies under load is a finding, not noise: keep its last words for the report.
    if (!stopping && role === 'server' && (code !== 0 || signal)) {
      unexpectedExits.push(
        `${name} (pid ${child.pid}) exited with ${signal ?? `code ${code}`}: ${errText.trim().split('\n').slice(0, 8).join(' | ')}`,
      );
    }
  });
  const handle: Child = {
    name,
    process: child,
    pid: child.pid,
    stderr: () => errText,
    stop: async () => {
      stopping = true;
      running.delete(handle);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
  running.add(handle);
  return handle;
}

/** A prober process: it says `{"ready":true}` once warmed up, then one JSON line of results. */
export interface Prober<T> {
  /** The results line, parsed; rejects if the process exits without one. */
  result: Promise<T>;
  /** Asks it to finish (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts a node script of bench/ on the load core as a prober and resolves once it reported ready.
 * Probers time requests from a process of their own, so the process sending the load is not what
 * is timed.
 */
export async function startProber<T>(name: string, script: string, args: string[]): Promise<Prober<T>> {
  let ready: () => void = () => undefined;
  let done: (value: T) => void = () => undefined;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  const result = new Promise<T>((resolve) => (done = resolve));
  const child = startChild(name, 'load', process.execPath, [join(BENCH_DIST, script), ...args], {
    onLine: (line) => {
      if (line.startsWith('{"ready"')) ready();
      else if (line.startsWith('{')) done(JSON.parse(line) as T);
    },
  });
  // 'close', not 'exit': the results line may still be in the pipe when the process has exited.
  const exited = new Promise<never>((_, reject) =>
    child.process.once('close', (code) => reject(new Error(`${name} exited (${code}) without its results: ${child.stderr()}`))),
  );
  exited.catch(() => undefined);
  await Promise.race([isReady, exited]);
  return { result: Promise.race([result, exited]), stop: () => child.stop() };
}

/** Stops every child still running (on exit or interrupt). */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...running].map((child) => child.stop()));
}

/** Kills remaining children synchronously, by pid, when the runner is exiting. */
export function killAllChildrenNow(): void {
  for (const child of running) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Starts a node entry point from dist/bench and waits for its `{"port":N}` line. */
export async function startNodeHelper(
  name: string,
  role: 'server' | 'load',
  script: string,
  args: string[],
  env?: NodeJS.ProcessEnv,
  nodeFlags: string[] = [],
): Promise<{ child: Child; port: number }> {
  let resolvePort: (port: number) => void;
  const portReady = new Promise<number>((resolve) => (resolvePort = resolve));
  const child = startChild(name, role, process.execPath, [...nodeFlags, join(BENCH_DIST, script), ...args], {
    env,
    onLine: (line) => {
      if (line.startsWith('{"port":')) resolvePort(JSON.parse(line).port as number);
    },
  });
  const port = await withTimeout(portReady, 15_000, () => `${name} did not start: ${child.stderr()}`, child);
  return { child, port };
}

/**
 * The loopback mock upstream as the gateway scenarios ask it: replies of 8 chunks of 6 characters,
 * unpaced (a short chat answer, served as fast as it is read).
 */
export function startGatewayMock(): Promise<{ child: Child; port: number }> {
  return startNodeHelper('mock-upstream', 'load', 'mock-upstream.js', [
    '--port',
    '0',
    '--chunks',
    '8',
    '--size',
    '6',
    '--interval-ms',
    '0',
  ]);
}

async function withTimeout<T>(promise: Promise<T>, ms: number, message: () => string, child?: Child): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const exited = child
    ? new Promise<never>((_, reject) =>
        child.process.once('exit', (code) => reject(new Error(`${child.name} exited (${code}): ${child.stderr()}`))),
      )
    : new Promise<never>(() => {});
  try {
    return await Promise.race([
      promise,
      exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message())), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Finds a free loopback port (bind to 0, read, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Polls a URL until it answers with `status` (default any < 500) or the time runs out. */
export async function waitForHttp(url: string, timeoutMs: number, child?: Child): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  while (Date.now() < deadline) {
    if (child && child.process.exitCode !== null) throw new Error(`${child.name} exited: ${child.stderr()}`);
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      if (response.status < 500) return;
      lastError = `status ${response.status}`;
    } catch (error) {
      lastError = (error as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms (${lastError})${child ? `: ${child.stderr()}` : ''}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The resident set size of a process in bytes (Linux /proc), or undefined elsewhere. */
export function rssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A process and all its descendants (Linux /proc), e.g. a clustered server's primary and workers. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(parent) ?? [];
      list.push(Number(entry));
      children.set(parent, list);
    } catch {
      // The process ended while being listed.
    }
  }
  const tree = [pid];
  for (let index = 0; index < tree.length; index += 1) tree.push(...(children.get(tree[index]!) ?? []));
  return tree;
}

/** Summed VmRSS of a process tree, or undefined when the root is gone. */
export function treeRssBytes(pid: number): number | undefined {
  const pids = processTree(pid);
  const root = rssBytes(pid);
  if (root === undefined) return undefined;
  return pids.slice(1).reduce((sum, child) => sum + (rssBytes(child) ?? 0), root);
}

/** Summed CPU seconds (user + system) of a process tree, or undefined when the root is gone. */
export function treeCpuSeconds(pid: number): number | undefined {
  const pids = processTree(pid);
  const root = cpuSeconds(pid);
  if (root === undefined) return undefined;
  return pids.slice(1).reduce((sum, child) => sum + (cpuSeconds(child) ?? 0), root);
}

/** The open-file limit of a process (Linux /proc), or undefined. */
export function openFileLimit(pid: number): number | undefined {
  try {
    const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
    const match = /Max open files\s+(\d+)/.exec(limits);
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** The value at quantile q (0..1) of unsorted samples (sorted in place). */
export function percentile(samples: number[] | Float64Array, q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = samples instanceof Float64Array ? samples.sort() : samples.sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

/** Rounds for display. */
export function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return value;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** A difference with its sign: +0.5, -0.2 (a figure measured as an excess may come out below zero). */
export function signed(value: number): string {
  return value < 0 ? String(value) : `+${value}`;
}

/** A scratch directory removed when the scenario ends. */
export function scratchDir(prefix: string, parent: string = tmpdir()): { path: string; remove(): void } {
  const path = mkdtempSync(join(parent, `colloquy-bench-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** What the machine and toolchain were, written next to every figure. */
export interface MachineInfo {
  cpu: string;
  cores: number;
  memory_gib: number;
  kernel: string;
  node: string;
  placement: string;
  load_generators: string[];
  commit: string | undefined;
  dirty: boolean | undefined;
  date: string;
  /** 1, 5 and 15 minute load averages when the run started: other work on a shared machine shows here. */
  load_average: number[];
}

/** Describes this machine, the placement and the code revision. */
export function machineInfo(): MachineInfo {
  let commit: string | undefined;
  let dirty: boolean | undefined;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim() !== '';
  } catch {
    // not a git checkout
  }
  const generators = [`autocannon ${autocannonVersion()}`];
  const wrk = wrkVersion();
  if (wrk) generators.push(wrk);
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memory_gib: round(totalmem() / 1024 ** 3, 1),
    kernel: `${process.platform} ${release()}`,
    node: process.version,
    placement: placement().note,
    load_generators: generators,
    commit,
    dirty,
    date: new Date().toISOString(),
    load_average: loadavg().map((value) => round(value, 2)),
  };
}

function autocannonVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules/autocannon/package.json'), 'utf8')) as { version: string };
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

let cachedWrk: string | null | undefined;
/** `wrk x.y.z` when wrk is installed, else undefined. */
export function wrkVersion(): string | undefined {
  if (cachedWrk !== undefined) return cachedWrk ?? undefined;
  cachedWrk = null;
  if (hasCommand('wrk')) {
    try {
      execFileSync('wrk', ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      // wrk -v exits 1 after printing its version.
      const output = `${(error as { stdout?: string }).stdout ?? ''}`;
      const match = /wrk (?:debian\/)?(\d+\.\d+\.\d+)/.exec(output);
      cachedWrk = match ? `wrk ${match[1]}` : 'wrk';
    }
    cachedWrk ??= 'wrk';
  }
  return cachedWrk ?? undefined;
}

/** One row of a result table. */
export type Row = Record<string, string | number | boolean | null>;

/** A goal from docs/benchmarks.md and how this run did against it. */
export interface GoalCheck {
  goal: string;
  measured: string;
  met: boolean | null;
  note?: string;
}

/** What a scenario hands back to the dispatcher. */
export interface ScenarioResult {
  rows: Row[];
  goals: GoalCheck[];
  notes: string[];
  /** Anything else worth keeping in the JSON. */
  extra?: Record<string, unknown>;
}

/** Options every scenario receives. */
export interface RunOptions {
  /** Seconds per measured load step. */
  duration: number;
  /** Shorter everything (smoke test of the harness). */
  quick: boolean;
  /** When set, the server under test writes a --cpu-prof profile here. */
  profileDir: string | undefined;
  /** Add the largest steps (the RAG scenario's 1M chunks). */
  scale: boolean;
}

export interface Scenario {
  /** Short id used on the command line (`npm run bench -- health`). */
  id: string;
  number: number;
  title: string;
  run(options: RunOptions): Promise<ScenarioResult>;
}

/** Formats rows as an aligned text table. */
export function formatTable(rows: Row[]): string {
  if (rows.length === 0) return '(no rows)';
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const cell = (value: Row[string] | undefined) => (value === undefined || value === null ? '' : String(value));
  const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => cell(row[column]).length)));
  const line = (values: string[]) =>
    values
      .map((value, index) => value.padEnd(widths[index]!))
      .join('  ')
      .trimEnd();
  return [
    line(columns),
    line(widths.map((width) => '-'.repeat(width))),
    ...rows.map((row) => line(columns.map((column) => cell(row[column])))),
  ].join('\n');
}

/** Formats rows as a Markdown table (for docs/benchmarks.md). */
export function markdownTable(rows: Row[]): string {
  if (rows.length === 0) return '';
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const cell = (value: Row[string] | undefined) => (value === undefined || value === null ? '' : String(value).replace(/\|/g, '\\|'));
  return [
    `| ${columns.join(' | ')} |`,
    `| ${columns.map(() => '---').join(' | ')} |`,
    ...rows.map((row) => `| ${columns.map((column) => cell(row[column])).join(' | ')} |`),
  ].join('\n');
}

/** Writes a JSON result file under bench/results/ and returns its path. */
export function writeResult(name: string, data: unknown): string {
  const dir = join(REPO_ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`);
  return path;
}

/** Bytes waiting in kernel socket queues on loopback connections (via `ss`), or undefined without it. */
export function socketQueues(filter: string): { recvQ: number; sendQ: number; sockets: number } | undefined {
  try {
    const output = execFileSync('ss', ['-tnH', 'state', 'established', filter], { encoding: 'utf8' });
    let recvQ = 0;
    let sendQ = 0;
    let sockets = 0;
    for (const line of output.split('\n')) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4) continue;
      recvQ += Number(fields[0]);
      sendQ += Number(fields[1]);
      sockets += 1;
    }
    return { recvQ, sendQ, sockets };
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) a process has used so far (Linux /proc), or undefined. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / 100;
  } catch {
    return undefined;
  }
}
