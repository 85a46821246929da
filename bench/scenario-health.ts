/** Scenario 1: GET /health against a bare uWS hello server, same binding, same core, same run. */
import { startColloquy } from './colloquy.js';
import { round, startNodeHelper, wrkVersion, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';
import { compareSaturation, runAutocannon, type LoadResult } from './load.js';

/** One table row for a load step. */
export function loadRow(name: string, result: LoadResult, extra: Row = {}): Row {
  return {
    target: name,
    tool: result.tool,
    'req/s': result.rps,
    'p50 ms': result.p50_ms,
    'p99 ms': result.p99_ms,
    errors: result.errors,
    non2xx: result.non2xx,
    ...extra,
  };
}

export const healthScenario: Scenario = {
  id: 'health',
  number: 1,
  title: '/health vs bare uWS hello',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const hello = await startNodeHelper('hello-uws', 'server', 'hello-uws.js', ['0']);
    const server = await startColloquy({ profileDir: options.profileDir });
    try {
      const connections = 50;
      const best = await compareSaturation(
        [
          { name: 'bare uWS hello', request: { url: `http://127.0.0.1:${hello.port}/`, connections, durationSeconds: options.duration } },
          { name: 'GET /health', request: { url: `${server.url}/health`, connections, durationSeconds: options.duration } },
        ],
        options.quick ? 1 : 2,
        options.quick ? 1 : 2,
      );
      const bare = best.get('bare uWS hello')!;
      const health = best.get('GET /health')!;
      const ratio = round(health.rps / bare.rps, 3);
      const rows = [loadRow('bare uWS hello', bare, { ratio: 1 }), loadRow('GET /health', health, { ratio })];
      const notes: string[] = [];
      if (wrkVersion()) {
        // The same pair with autocannon, for users without wrk: it shows where autocannon caps.
        const bareAc = await runAutocannon({ url: `http://127.0.0.1:${hello.port}/`, connections, durationSeconds: options.duration });
        const healthAc = await runAutocannon({ url: `${server.url}/health`, connections, durationSeconds: options.duration });
        rows.push(
          loadRow('bare uWS hello', bareAc, { ratio: 1 }),
          loadRow('GET /health', healthAc, { ratio: round(healthAc.rps / bareAc.rps, 3) }),
        );
        notes.push(
          'the goal uses the wrk pair; the autocannon pair (one step each) is load-generator bound on the bare server, so its ratio reads high',
        );
      }
      return {
        rows,
        goals: [{ goal: '/health ≥ 0.5× bare uWS', measured: `${ratio}×`, met: ratio >= 0.5 && health.non2xx === 0 }],
        notes: [`${connections} connections, keep-alive, no pipelining; best of alternating steps of ${options.duration} s`, ...notes],
      };
    } finally {
      await server.stop();
      await hello.child.stop();
    }
  },
};
