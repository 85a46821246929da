/**
 * Scenario 10: 100 documents of 500 KB uploaded at once (multipart, one file per request) to the
 * server process, while a prober (its own process) asks /health every 20 ms and a chat every 200 ms. Reports how long
 * the documents took, the rate, /health and chat latency during it, and the server's own event-loop
 * delay (prom-client's figures from /metrics, reset by the scrape before the burst, less the
 * sampling interval they include).
 */
import { startColloquy } from './colloquy.js';
import { percentile, round, startProber, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { proseDocument } from './prose.js';

const DOCUMENT_BYTES = 500 * 1024;
const ADMIN = 'bench-ingest-admin-token-0123456789';

/**
 * prom-client samples the event loop with a timer every 10 ms (`monitorEventLoopDelay`'s default
 * resolution) and its histogram records the time between two firings: the interval itself plus
 * however late the timer fired. An idle loop therefore reads about 10 ms; the delay is the reading
 * less the interval.
 */
const SAMPLING_MS = 10;

/** The loop's delay (p99, max) in ms from the server's /metrics, and the raw readings it comes from. */
async function eventLoopDelay(url: string): Promise<{ p99: number; max: number; rawP99: number; rawMax: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = (name: string) =>
    Number(new RegExp(`^colloquy_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) * 1000;
  const rawP99 = value('p99');
  const rawMax = value('max');
  return { p99: Math.max(0, rawP99 - SAMPLING_MS), max: Math.max(0, rawMax - SAMPLING_MS), rawP99, rawMax };
}

export const ingestLoadScenario: Scenario = {
  id: 'ingest-load',
  number: 10,
  title: '100 documents of 500 KB uploaded at once: /health and the event loop meanwhile',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const uploads = options.quick ? 20 : 100;
    const server = await startColloquy({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      ...(options.profileDir ? { profileDir: options.profileDir } : {}),
    });
    try {
      const bodies = Array.from({ length: uploads }, (_, index) => proseDocument(index + 1, DOCUMENT_BYTES));
      // Idle figures first: the event-loop delay of the same server doing nothing but the probes.
      await eventLoopDelay(server.url);
      const idleHealth: number[] = [];
      for (let probe = 0; probe < 50; probe += 1) {
        const asked = performance.now();
        await (await fetch(`${server.url}/health`)).arrayBuffer();
        idleHealth.push(performance.now() - asked);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const idleDelay = await eventLoopDelay(server.url);

      // The prober runs in its own process on the load core: this one is busy sending 50 MB.
      const prober = await startProber<{ health: number[]; chats: number[] }>('health-prober', 'health-prober.js', [server.url]);
      const started = performance.now();
      const statuses = await Promise.all(
        bodies.map(async (text, index) => {
          const form = new FormData();
          form.append('collection', 'bench');
          form.append('file', new Blob([text], { type: 'text/plain' }), `document-${index}.txt`);
          const response = await fetch(`${server.url}/api/rag/documents`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ADMIN}` },
            body: form,
          });
          await response.arrayBuffer();
          return response.status;
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      await prober.stop();
      const { health, chats } = await prober.result;
      const delay = await eventLoopDelay(server.url);
      health.sort((a, b) => a - b);
      idleHealth.sort((a, b) => a - b);
      chats.sort((a, b) => a - b);
      const failed = statuses.filter((status) => status !== 201).length;
      const rows: Row[] = [
        {
          phase: 'idle',
          documents: 0,
          seconds: null,
          'MB/s': null,
          '/health p50 ms': round(percentile(idleHealth, 0.5), 2),
          '/health p99 ms': round(percentile(idleHealth, 0.99), 2),
          'chat p99 ms': null,
          'event loop delay p99 ms': round(idleDelay.p99, 1),
          'event loop delay max ms': round(idleDelay.max, 1),
          'raw reading p99 / max ms': `${round(idleDelay.rawP99, 1)} / ${round(idleDelay.rawMax, 1)}`,
        },
        {
          phase: `${uploads} × 500 KB at once`,
          documents: uploads - failed,
          seconds: round(seconds, 1),
          'MB/s': round((uploads * DOCUMENT_BYTES) / 1024 ** 2 / seconds, 1),
          '/health p50 ms': round(percentile(health, 0.5), 2),
          '/health p99 ms': round(percentile(health, 0.99), 2),
          'chat p99 ms': round(percentile(chats, 0.99), 1),
          'event loop delay p99 ms': round(delay.p99, 1),
          'event loop delay max ms': round(delay.max, 1),
          'raw reading p99 / max ms': `${round(delay.rawP99, 1)} / ${round(delay.rawMax, 1)}`,
        },
      ];
      const healthP99 = percentile(health, 0.99);
      return {
        rows,
        goals: [
          {
            goal: `/health p99 ≤ 50 ms while ${uploads} documents of 500 KB go in`,
            measured: `${round(healthP99, 1)} ms`,
            met: healthP99 <= 50 && failed === 0,
          },
          { goal: 'server event-loop delay p99 ≤ 10 ms during ingestion', measured: `${round(delay.p99, 1)} ms`, met: delay.p99 <= 10 },
          { goal: 'server event-loop delay max ≤ 50 ms during ingestion', measured: `${round(delay.max, 1)} ms`, met: delay.max <= 50 },
        ],
        notes: [
          `one .txt file of 500 KB per multipart request, all ${uploads} sent at once; ${health.length} /health probes (one every 20 ms, from a process of their own that made one untimed request first) and ${chats.length} chats (built-in model) during it; /health over 50 ms: ${health.filter((ms) => ms > 50).length}`,
          `event-loop delay: prom-client’s colloquy_nodejs_eventloop_lag_p99/max_seconds from the server’s /metrics, reset by the scrape before the phase, less the ${SAMPLING_MS} ms sampling interval each reading includes (an idle loop reads about ${SAMPLING_MS} ms; the raw readings are beside)`,
          `the server runs with its default worker pool (cores − 1 threads, at least one); failed uploads: ${failed}`,
        ],
      };
    } finally {
      await server.stop();
    }
  },
};
