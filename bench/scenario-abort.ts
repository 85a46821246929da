/**
 * Scenario 7: a client disconnects mid-stream; how long until the server closed its upstream
 * connection? The mock runs inside this process so the disconnect and the upstream close are
 * timed on one clock. Measured alone and again with busy streams alongside.
 */
import { MOCK_MODEL_ID, probe, startColloquy } from './colloquy.js';
import { percentile, round, sleep, type GoalCheck, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { startMock, type MockUpstream } from './mock-upstream.js';
import { openStreams, SseStream } from './sse-client.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';

interface AbortFigures {
  samples: number[];
  timeouts: number;
  failures: number;
}

/** Runs `count` sequential disconnects and times each upstream close. */
async function measureAborts(mock: MockUpstream, serverPort: number, count: number, label: string): Promise<AbortFigures> {
  const figures: AbortFigures = { samples: [], timeouts: 0, failures: 0 };
  for (let index = 0; index < count; index += 1) {
    const tag = `${label}${index}`;
    let disconnectedAt = 0;
    const closed = new Promise<number>((resolve) => {
      const listener = (closedTag: string | undefined, at: number) => {
        if (closedTag !== tag) return;
        mock.events.off('closed', listener);
        resolve(at);
      };
      mock.events.on('closed', listener);
      setTimeout(() => {
        mock.events.off('closed', listener);
        resolve(-1);
      }, 2000).unref();
    });
    const stream = new SseStream({
      port: serverPort,
      path: '/api/chat/stream',
      body: { message: `Keep talking. [mock chunks=1000 interval_ms=20 size=8 tag=${tag}]`, model: MOCK_MODEL_ID },
      dialect: 'colloquy',
      onFirstDelta: (self) => {
        disconnectedAt = performance.now();
        self.destroy();
      },
    });
    await stream.finished;
    if (disconnectedAt === 0) {
      figures.failures += 1;
      continue;
    }
    const closedAt = await closed;
    if (closedAt < 0) figures.timeouts += 1;
    else figures.samples.push(closedAt - disconnectedAt);
  }
  return figures;
}

function row(condition: string, figures: AbortFigures, runs: number): Row {
  return {
    condition,
    runs,
    'p50 ms': round(percentile(figures.samples, 0.5), 3),
    'p99 ms': round(percentile(figures.samples, 0.99), 3),
    'max ms': round(figures.samples.length ? Math.max(...figures.samples) : Number.NaN, 3),
    'not closed in 2 s': figures.timeouts,
    'no first delta': figures.failures,
  };
}

export const abortScenario: Scenario = {
  id: 'abort',
  number: 7,
  title: 'abort: client disconnect → upstream connection closed',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const mock = await startMock({ port: 0, chunks: 4, intervalMs: 0, size: 8, unbounded: false });
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir });
    try {
      const check = await probe(`${server.url}/api/chat/`, { message: 'warm up', model: MOCK_MODEL_ID });
      const skipped = skippedUnlessReady('POST /api/chat/ (openai provider)', check.status, check.body);
      if (skipped) return skipped;
      const runs = options.quick ? 50 : 300;
      await measureAborts(mock, server.port, 20, 'warm');
      const idle = await measureAborts(mock, server.port, runs, 'idle');

      const backgroundCount = options.quick ? 100 : 1000;
      const background = await openStreams(backgroundCount, 2000, () => ({
        port: server.port,
        path: '/api/chat/stream',
        body: { message: 'Background chatter. [mock chunks=100000 interval_ms=100 size=8]', model: MOCK_MODEL_ID },
        dialect: 'colloquy',
      }));
      await sleep(500);
      const busy = await measureAborts(mock, server.port, runs, 'busy');
      for (const stream of background) stream.destroy();
      await Promise.all(background.map((stream) => stream.finished));

      const p99 = percentile(busy.samples.concat(idle.samples), 0.99);
      const goals: GoalCheck[] = [
        {
          goal: 'abort → upstream closed ≤ 20 ms p99 (idle and beside the open streams)',
          measured: `${round(percentile(idle.samples, 0.99), 2)} ms p99 idle, ${round(percentile(busy.samples, 0.99), 2)} ms p99 beside ${backgroundCount} streams`,
          met: p99 <= 20 && idle.timeouts + busy.timeouts === 0,
        },
      ];
      return {
        rows: [row('no other traffic', idle, runs), row(`beside ${backgroundCount} open streams (10 deltas/s each)`, busy, runs)],
        goals,
        notes: [
          'the client destroys its socket on the first delta; the clock stops when the mock sees its request connection close (same process, same clock)',
        ],
      };
    } finally {
      await server.stop();
      await mock.close();
    }
  },
};
