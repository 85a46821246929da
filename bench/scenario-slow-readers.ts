/**
 * Scenario 6: slow readers. Clients read their first delta and then stop reading while the
 * upstream keeps sending as fast as it can. Measured: server memory per stalled stream, and the
 * fast clients' timing with and without the stalled ones beside them.
 */
import { MOCK_MODEL_ID, probe, startColloquy } from './colloquy.js';
import {
  percentile,
  round,
  rssBytes,
  sleep,
  socketQueues,
  startNodeHelper,
  type Row,
  type RunOptions,
  type Scenario,
  type ScenarioResult,
} from './harness.js';
import { mockStats } from './scenario-gateway-overhead.js';
import { openStreams, type SseStream } from './sse-client.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';
import { errorSummary } from './scenario-streams.js';

const KIB = 1024;

interface FastFigures {
  completed: number;
  errors: string;
  ttfdP50: number;
  gapP99: number;
  /** Median wall time of a whole fast stream. */
  durationP50: number;
}

function fastFigures(streams: SseStream[]): FastFigures {
  const ttfd = streams.filter((stream) => stream.firstDeltaAt > 0).map((stream) => stream.firstDeltaAt - stream.startedAt);
  const gaps = streams.flatMap((stream) => stream.gaps);
  const durations = streams.filter((stream) => stream.completed).map((stream) => stream.lastDeltaAt - stream.startedAt);
  return {
    completed: streams.filter((stream) => stream.completed && !stream.error).length,
    errors: errorSummary(streams),
    ttfdP50: percentile(ttfd, 0.5),
    gapP99: percentile(gaps, 0.99),
    durationP50: percentile(durations, 0.5),
  };
}

function openFast(port: number, count: number, message: string): Promise<SseStream[]> {
  return openStreams(count, 1000, () => ({ port, path: '/api/chat/stream', body: { message, model: MOCK_MODEL_ID }, dialect: 'colloquy' }));
}

async function settle(streams: SseStream[], ms: number): Promise<void> {
  const all = Promise.all(streams.map((stream) => stream.finished));
  const timedOut = await Promise.race([all.then(() => false), sleep(ms).then(() => true)]);
  if (timedOut) for (const stream of streams) stream.destroy();
  await all;
}

export const slowReadersScenario: Scenario = {
  id: 'slow-readers',
  number: 6,
  title: 'slow readers: stalled clients while the upstream keeps sending',
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
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir, inspect: true });
    try {
      const check = await probe(`${server.url}/api/chat/`, { message: 'warm up', model: MOCK_MODEL_ID });
      const skipped = skippedUnlessReady('POST /api/chat/ (openai provider)', check.status, check.body);
      if (skipped) return skipped;
      const stalledCount = options.quick ? 30 : 100;
      const fastCount = 50;
      // Short enough to finish while the stalled readers are still held (see the uWS timeout below).
      const phaseMs = 3000;
      // Fast clients: a paced reply (20 ms per delta) that lasts the phase.
      const fastChunks = Math.floor(phaseMs / 20);
      const fastMessage = `Fast reader. [mock chunks=${fastChunks} interval_ms=20 size=16]`;
      // Stalled clients: the upstream offers 16 frames of 512 characters every 5 ms (1.6 MiB/s) for far
      // longer than the test. Real model frames are smaller still; a few large frames would measure
      // the size of one socket read rather than what a stream holds (see docs/benchmarks.md).
      const floodMessage = `Flood me. [mock chunks=10000000 interval_ms=5 size=512 burst=16]`;

      // Phase A: fast clients alone (baseline), after one warm-up round.
      await settle(await openFast(server.port, fastCount, fastMessage), phaseMs + 10_000);
      await sleep(500);
      const baselineStreams = await openFast(server.port, fastCount, fastMessage);
      await settle(baselineStreams, phaseMs + 10_000);
      const baseline = fastFigures(baselineStreams);
      await sleep(500);
      const idle = (await server.memoryAfterGc())!;
      const idleRss = rssBytes(server.pid) ?? idle.rss;

      // Phase B: stalled readers first; until every kernel buffer on the way is full they are simply
      // fast streams, and the claim is about readers that are stalled, so wait until the upstream
      // bytes stop moving and the mock's own queues are full (until then it still builds frames for
      // them, on the load core the fast clients share), then measure what the server holds and run
      // the fast clients beside them.
      const stalled = await openStreams(stalledCount, 1000, () => ({
        port: server.port,
        path: '/api/chat/stream',
        body: { message: floodMessage, model: MOCK_MODEL_ID },
        dialect: 'colloquy',
        stallAfterFirstDelta: true,
      }));
      let peakRss = idleRss;
      const sampler = setInterval(() => {
        peakRss = Math.max(peakRss, rssBytes(server.pid) ?? 0);
      }, 200);
      const fillStarted = performance.now();
      let lastFlushed = -1;
      let lastPending = -1;
      let lastQueues = '';
      for (;;) {
        await sleep(250);
        const { bytes_flushed: flushed, bytes_pending: pending } = await mockStats(mock.port);
        // Bytes that left the mock may still wait in its sockets' kernel queues, which the server
        // drains as it reads: the streams are stalled once those and the queues toward the clients
        // stopped moving too, and the mock's queues stopped growing (each at its cap).
        const queues = `${socketQueues(`( sport = :${mock.port} )`)?.sendQ}/${socketQueues(`( sport = :${server.port} )`)?.sendQ}`;
        const still = flushed === lastFlushed && pending === lastPending && queues === lastQueues;
        if (still || performance.now() - fillStarted > 30_000) break;
        lastFlushed = flushed;
        lastPending = pending;
        lastQueues = queues;
      }
      const fillSeconds = (performance.now() - fillStarted) / 1000;
      const held = (await server.memoryAfterGc())!;
      const upstream = await mockStats(mock.port);
      const upstreamQueues = socketQueues(`( dport = :${mock.port} )`);
      const clientQueues = socketQueues(`( sport = :${server.port} )`);
      const contendedStreams = await openFast(server.port, fastCount, fastMessage);
      await settle(contendedStreams, phaseMs + 10_000);
      clearInterval(sampler);
      const contended = fastFigures(contendedStreams);
      const stalledOk = stalled.filter((stream) => stream.isStalled).length;
      const stillHeld = stalled.filter((stream) => !stream.error).length;
      const delivered = stalled.reduce((total, stream) => total + stream.bodyBytes, 0);
      // Does the server ever give up on a stalled reader by itself? (bounded wait)
      // The server's stall timeout (30 s by default) runs from its last drain, about when the
      // buffers filled: watch until 40 s after that.
      const watchUntil = fillStarted + fillSeconds * 1000 + 40_000;
      await Promise.race([Promise.all(stalled.map((stream) => stream.finished)), sleep(Math.max(0, watchUntil - performance.now()))]);
      const cutByServer = stalled.filter((stream) => stream.error).length;
      const cutSeconds = (performance.now() - fillStarted) / 1000;
      for (const stream of stalled) stream.destroy();
      await Promise.all(stalled.map((stream) => stream.finished));
      await sleep(1000);
      const released = (await server.memoryAfterGc())!;
      const after = await mockStats(mock.port);

      const heldPerStalled = (held.heapUsed + held.external - idle.heapUsed - idle.external) / stalledCount;
      const rssPerStalled = (peakRss - idleRss) / stalledCount;
      const slowdown = contended.durationP50 / baseline.durationP50;
      const rows: Row[] = [
        {
          phase: 'fast clients alone',
          fast: fastCount,
          stalled: 0,
          completed: baseline.completed,
          'TTFD p50 ms': round(baseline.ttfdP50, 2),
          'gap p99 ms': round(baseline.gapP99, 2),
          'stream p50 ms': round(baseline.durationP50, 0),
          'RSS MiB': round(idleRss / KIB / KIB, 1),
          'heap+ext after GC MiB': round((idle.heapUsed + idle.external) / KIB / KIB, 1),
        },
        {
          phase: 'fast beside stalled',
          fast: fastCount,
          stalled: stalledOk,
          completed: contended.completed,
          'TTFD p50 ms': round(contended.ttfdP50, 2),
          'gap p99 ms': round(contended.gapP99, 2),
          'stream p50 ms': round(contended.durationP50, 0),
          'RSS MiB': round(peakRss / KIB / KIB, 1),
          'heap+ext after GC MiB': round((held.heapUsed + held.external) / KIB / KIB, 1),
          'KiB/stalled (heap)': round(heldPerStalled / KIB, 1),
          'KiB/stalled (RSS)': round(rssPerStalled / KIB, 1),
        },
      ];
      const fastOk = contended.completed === fastCount && baseline.completed === fastCount && slowdown <= 1.05;
      const notes = [
        `stalled clients read one delta then stop reading; the mock offers each of them 16 frames of 512 characters every 5 ms (1.6 MiB/s) and keeps up to 4 MiB queued in its own process`,
        `the upstream stopped moving bytes to the stalled streams and the mock's queues stopped growing ${round(fillSeconds, 1)} s after they were opened (every kernel buffer on the way full and no longer draining: ${round(lastFlushed / stalledCount / KIB / KIB, 1)} MiB per stream had left the mock); memory was measured then, and the fast clients ran right after`,
        `heap figure: server heapUsed + external after a forced full GC (inspector), stalled minus idle, per stalled stream; RSS figure: peak RSS minus idle`,
      ];
      if (upstreamQueues && clientQueues) {
        notes.push(
          `kernel queues while stalled: ${round(upstreamQueues.recvQ / KIB / KIB, 1)} MiB unread in the server's ${upstreamQueues.sockets} upstream sockets (${round(upstreamQueues.recvQ / Math.max(1, upstreamQueues.sockets) / KIB, 0)} KiB each), ${round(clientQueues.sendQ / KIB / KIB, 1)} MiB queued toward clients; the mock could not hand over ${round(upstream.bytes_pending / KIB / KIB, 1)} MiB more`,
        );
      }
      notes.push(
        `stalled clients had received ${round(delivered / stalledCount / KIB, 1)} KiB each before stalling; ${stillHeld} of ${stalledCount} were still connected when the fast clients finished`,
      );
      notes.push(
        `${cutByServer} of ${stalledCount} stalled readers were disconnected by the server within ${round(cutSeconds, 1)} s of stalling`,
      );
      notes.push(
        `after the stalled clients disconnected: heap+ext ${round((released.heapUsed + released.external) / KIB / KIB, 1)} MiB after GC, upstream streams closed early ${after.streams_closed_early}, still open ${after.streams_open}`,
      );
      return {
        rows,
        goals: [
          {
            goal: 'a stalled reader holds ≤ 64 KiB',
            measured: `${round(heldPerStalled / KIB, 1)} KiB per stalled stream (heap after GC; RSS ${round(rssPerStalled / KIB, 0)} KiB)`,
            met: heldPerStalled <= 64 * KIB && stalledOk === stalledCount,
          },
          {
            goal: 'fast clients beside stalled ones: stream time ≤ ×1.05',
            measured: `fast stream time ×${round(slowdown, 3)}, ${contended.completed}/${fastCount} completed`,
            met: fastOk,
            note: contended.errors || undefined,
          },
        ],
        notes,
      };
    } finally {
      await server.stop();
      await mock.child.stop();
    }
  },
};
