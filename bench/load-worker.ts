/**
 * Child entry that runs one autocannon step and prints one JSON line. It records every response
 * time itself (autocannon's own histogram keeps whole milliseconds, too coarse for added latency).
 * Usage: node dist/bench/load-worker.js '<LoadRequest JSON>'
 */
import { createRequire } from 'node:module';
import type { LoadRequest, LoadResult } from './load.js';
import { percentile, round } from './harness.js';

interface AutocannonInstance {
  on(event: 'response', listener: (client: unknown, statusCode: number, bytes: number, responseTime: number) => void): void;
}
interface AutocannonSummary {
  errors: number;
  timeouts: number;
  non2xx: number;
  duration: number;
}
type Autocannon = (options: Record<string, unknown>, done: (error: Error | null, result: AutocannonSummary) => void) => AutocannonInstance;

const require = createRequire(import.meta.url);
const autocannon = require('autocannon') as Autocannon;

const request = JSON.parse(process.argv[2] ?? '{}') as LoadRequest;
let samples = new Float64Array(1 << 16);
let count = 0;
let ok = 0;
const bodies = request.bodies ?? [];
let next = 0;

const started = performance.now();
const instance = autocannon(
  {
    url: request.url,
    method: request.method ?? 'GET',
    headers: request.headers ?? {},
    connections: request.connections,
    duration: request.durationSeconds,
    pipelining: 1,
    ...(request.rate ? { overallRate: request.rate } : {}),
    ...(bodies.length > 0
      ? {
          requests: [
            {
              setupRequest: (prepared: Record<string, unknown>) => ({ ...prepared, body: bodies[next++ % bodies.length] }),
            },
          ],
        }
      : {}),
  },
  (error, result) => {
    if (error) {
      process.stderr.write(`autocannon: ${error.message}\n`);
      process.exit(1);
    }
    const elapsed = (performance.now() - started) / 1000;
    const latencies = samples.subarray(0, count);
    const sum = latencies.reduce((total, value) => total + value, 0);
    const output: LoadResult = {
      tool: 'autocannon',
      requests: count,
      rps: round(ok / Math.min(elapsed, result.duration || elapsed), 0),
      p50_ms: round(percentile(latencies, 0.5), 3),
      p90_ms: round(percentile(latencies, 0.9), 3),
      p99_ms: round(percentile(latencies, 0.99), 3),
      max_ms: round(count > 0 ? latencies[count - 1]! : Number.NaN, 3),
      mean_ms: round(count > 0 ? sum / count : Number.NaN, 3),
      errors: result.errors + result.timeouts,
      non2xx: result.non2xx,
    };
    process.stdout.write(`${JSON.stringify(output)}\n`);
    process.exit(0);
  },
);
instance.on('response', (_client, statusCode, _bytes, responseTime) => {
  if (statusCode >= 200 && statusCode < 300) ok += 1;
  if (count === samples.length) {
    const grown = new Float64Array(samples.length * 2);
    grown.set(samples);
    samples = grown;
  }
  samples[count++] = responseTime;
});
