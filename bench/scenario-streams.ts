/**
 * Scenario 5: N concurrent SSE streams (1k, 10k) held open through a paced upstream: server RSS
 * per open stream, time to first delta, inter-chunk jitter against the upstream's pace, errors.
 */
import { MOCK_MODEL_ID, probeRequest, startColloquy } from './colloquy.js';
import {
  startProber,
  openFileLimit,
  percentile,
  round,
  sleep,
  cpuSeconds,
  treeCpuSeconds,
  treeRssBytes,
  startNodeHelper,
  type GoalCheck,
  type Row,
  type RunOptions,
  type Scenario,
  type ScenarioResult,
} from './harness.js';
import { openStreams, SseStream } from './sse-client.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';
import { probe } from './colloquy.js';

const MIB = 1024 * 1024;

function cpuOfThisProcess(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}
/** Short streams opened one at a time while the N streams are held open, to time the first delta. */
const PROBES = 40;

/** JIT, the upstream keep-alive pool and LMDB see some traffic before anything is timed. */
async function warmUp(port: number): Promise<void> {
  const warm = await openStreams(300, 1000, () => ({
    port,
    path: '/api/chat/stream',
    body: { message: 'Warm up. [mock chunks=3 interval_ms=50 size=8]', model: MOCK_MODEL_ID },
    dialect: 'colloquy',
  }));
  await Promise.all(warm.map((stream) => stream.finished));
  await sleep(500);
}

/** Counts errors by message. */
export function errorSummary(streams: SseStream[]): string {
  const counts = new Map<string, number>();
  for (const stream of streams) if (stream.error) counts.set(stream.error, (counts.get(stream.error) ?? 0) + 1);
  return [...counts].map(([message, count]) => `${count}× ${message}`).join('; ');
}

interface Step {
  target: number;
  intervalMs: number;
  holdMs: number;
  rampPerSecond: number;
}

/** Runs one step and returns its row plus the figures the goal needs. */
async function runStep(
  serverPort: number,
  serverPid: number,
  mockPid: number,
  step: Step,
  count: number,
): Promise<{ row: Row; peakRss: number; idleRss: number }> {
  const rampMs = (count / step.rampPerSecond) * 1000;
  const chunks = Math.ceil((rampMs + step.holdMs) / step.intervalMs) + 1;
  const idleRss = treeRssBytes(serverPid) ?? 0;
  const message = `Stream to me slowly. [mock chunks=${chunks} interval_ms=${step.intervalMs} size=8]`;
  const streams = await openStreams(count, step.rampPerSecond, () => ({
    port: serverPort,
    path: '/api/chat/stream',
    body: { message, model: MOCK_MODEL_ID },
    dialect: 'colloquy',
  }));
  // Every stream is open from the end of the ramp until the first one finishes: sample RSS then,
  // and time the first delta of short probe streams opened one at a time beside the N open ones.
  let peakRss = idleRss;
  const openDuring: number[] = [];
  const holdStart = performance.now();
  const holdEnd = holdStart + step.holdMs - 500;
  const cpuAtStart = treeCpuSeconds(serverPid);
  // The load core runs this client and the mock: if it is saturated, client-side timings suffer.
  const loadCpuAtStart = (cpuSeconds(mockPid) ?? 0) + cpuOfThisProcess();
  // The timed probes come from a process of their own; the same probes opened by this process,
  // which reads the N streams, are reported beside them (they count this client's own delays).
  const spacing = (step.holdMs - 1500) / PROBES;
  const delay = 500 - (performance.now() - holdStart);
  const prober = await startProber<{ ttfd: number[]; failed: number }>('stream-prober', 'stream-prober.js', [
    String(serverPort),
    String(PROBES),
    String(Math.round(spacing)),
    String(Math.round(delay)),
  ]);
  const probes: SseStream[] = [];
  let nextProbe = holdStart + 500 + spacing / 2;
  while (performance.now() < holdEnd) {
    await sleep(50);
    peakRss = Math.max(peakRss, treeRssBytes(serverPid) ?? 0);
    if (performance.now() >= nextProbe && probes.length < PROBES) {
      nextProbe += spacing;
      probes.push(new SseStream(probeRequest(serverPort)));
    }
    openDuring.push(streams.filter((stream) => stream.firstDeltaAt > 0 && !stream.completed && !stream.error).length);
  }
  const cpuAtEnd = treeCpuSeconds(serverPid);
  const loadCpuShare = ((cpuSeconds(mockPid) ?? 0) + cpuOfThisProcess() - loadCpuAtStart) / ((performance.now() - holdStart) / 1000);
  const cpuShare =
    cpuAtStart !== undefined && cpuAtEnd !== undefined ? (cpuAtEnd - cpuAtStart) / ((performance.now() - holdStart) / 1000) : Number.NaN;
  await Promise.all(probes.map((probe) => probe.finished));
  const inClientTtfd = probes.filter((probe) => probe.firstDeltaAt > 0).map((probe) => probe.firstDeltaAt - probe.startedAt);
  const { ttfd: probeTtfd, failed: failedProbes } = await prober.result;
  await prober.stop();
  const deadline = sleep(chunks * step.intervalMs + 15_000).then(() => 'timeout' as const);
  const all = Promise.all(streams.map((stream) => stream.finished));
  if ((await Promise.race([all, deadline])) === 'timeout') for (const stream of streams) if (!stream.completed) stream.destroy();
  await all;

  const ttfd = streams.filter((stream) => stream.firstDeltaAt > 0).map((stream) => stream.firstDeltaAt - stream.startedAt);
  const jitter: number[] = [];
  for (const stream of streams) for (const gap of stream.gaps) jitter.push(Math.abs(gap - step.intervalMs));
  const completed = streams.filter((stream) => stream.completed && !stream.error).length;
  const errors = streams.length - completed;
  const perStream = (peakRss - idleRss) / count;
  const row: Row = {
    streams: count,
    'pace ms': step.intervalMs,
    'max open': Math.max(0, ...openDuring),
    'RSS idle MiB': round(idleRss / MIB, 1),
    'RSS peak MiB': round(peakRss / MIB, 1),
    'KiB/stream': round(perStream / 1024, 1),
    'server CPU %': round(cpuShare * 100, 0),
    'load core CPU %': round(loadCpuShare * 100, 0),
    'TTFD ramp p50 ms': round(percentile(ttfd, 0.5), 2),
    'TTFD ramp p99 ms': round(percentile(ttfd, 0.99), 2),
    'TTFD probe p50 ms': round(percentile(probeTtfd, 0.5), 2),
    'TTFD probe p99 ms': round(percentile(probeTtfd, 0.99), 2),
    'TTFD probe in-client p99 ms': round(percentile(inClientTtfd, 0.99), 2),
    'jitter p50 ms': round(percentile(jitter, 0.5), 2),
    'jitter p99 ms': round(percentile(jitter, 0.99), 2),
    completed,
    errors,
    'failed probes': failedProbes,
  };
  if (errors > 0) row.error = errorSummary(streams).slice(0, 200);
  return { row, peakRss, idleRss };
}

export const streamsScenario: Scenario = {
  id: 'streams',
  number: 5,
  title: 'concurrent SSE streams through a paced upstream',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const mock = await startNodeHelper('mock-upstream', 'load', 'mock-upstream.js', [
      '--port',
      '0',
      '--chunks',
      '4',
      '--size',
      '8',
      '--interval-ms',
      '0',
    ]);
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir });
    try {
      const check = await probe(`${server.url}/api/chat/`, { message: 'warm up', model: MOCK_MODEL_ID });
      const skipped = skippedUnlessReady('POST /api/chat/ (openai provider)', check.status, check.body);
      if (skipped) return skipped;
      // Each proxied stream holds two sockets in the server (client and upstream).
      const fdLimit = openFileLimit(server.pid) ?? 65_536;
      const ceiling = Math.floor((fdLimit - 256) / 2);
      const steps: Step[] = options.quick
        ? [
            { target: 100, intervalMs: 500, holdMs: 2000, rampPerSecond: 1000 },
            { target: 1000, intervalMs: 1000, holdMs: 3000, rampPerSecond: 2000 },
          ]
        : [
            { target: 1000, intervalMs: 1000, holdMs: 5000, rampPerSecond: 2000 },
            { target: 10_000, intervalMs: 1000, holdMs: 6000, rampPerSecond: 2000 },
          ];
      await warmUp(server.port);
      const rows: Row[] = [];
      const goals: GoalCheck[] = [];
      const notes: string[] = [];
      for (const step of steps) {
        // A step beyond one process's descriptors runs on one node of several worker processes
        // (WORKERS, sharing the port), all on the server's core like the single process.
        const workers = Math.ceil(step.target / ceiling);
        let node = server;
        if (workers > 1) {
          node = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir, env: { WORKERS: String(workers) } });
          await warmUp(node.port);
          notes.push(
            `${step.target} streams run on one node with WORKERS=${workers}: one process's open-file limit (${fdLimit}) holds ${ceiling} proxied streams (two sockets each); RSS and CPU are the sums over the node's processes`,
          );
        }
        const count = step.target;
        let result: Awaited<ReturnType<typeof runStep>>;
        try {
          result = await runStep(node.port, node.pid, mock.child.pid, step, count);
        } finally {
          if (node !== server) await node.stop();
        }
        const { peakRss, idleRss } = result;
        const row: Row = { streams: count, workers, ...result.row };
        rows.push(row);
        if (step.target === 10_000) {
          goals.push({
            goal: '10k open streams ≤ 1 GiB RSS',
            measured: `${round(peakRss / MIB, 0)} MiB RSS (${round((peakRss - idleRss) / count / 1024, 1)} KiB per stream)`,
            met: peakRss <= 1024 * MIB && (row.errors as number) === 0,
          });
          const probeP99 = row['TTFD probe p99 ms'] as number;
          goals.push({
            goal: '10k streams: 0 errors, 0 refusals, probe TTFD p99 ≤ 50 ms',
            measured: `${row.errors} errors of ${count} streams, probe TTFD p99 ${probeP99} ms`,
            met: (row.errors as number) === 0 && (row['failed probes'] as number) === 0 && probeP99 <= 50,
          });
        }
        await sleep(1000);
      }
      notes.push(
        'TTFD: request written → first `delta` event at the client (the mock sends its first token at once); "ramp" = the N streams themselves while being opened at 2000/s, "probe" = 40 short streams opened one at a time while all N are open, from a process of their own on the load core (after one untimed probe); "in-client" = 40 more opened the same way by the process that holds the N streams, between them (its own turns and collections count there)',
      );
      notes.push(
        'jitter: |gap between consecutive deltas − upstream pace|; server CPU % = CPU time of the server processes over the hold window (100 = one core), load core CPU % = the same for this client plus the mock; RSS is VmRSS of the server (summed over its processes), idle = before the step',
      );
      return { rows, goals, notes };
    } finally {
      await server.stop();
      await mock.child.stop();
    }
  },
};
