/**
 * The Redis storage engine under load. `redisGatewayRows` (part of the gateway-overhead scenario):
 * the same gateway chat as its LMDB row, with the server on a redis-server with `appendfsync
 * always` and with `everysec`, in the same run. `redisNodesScenario`: built-in chat throughput of
 * three nodes sharing one Redis (load spread over all three at once) against one node on it.
 */
import { probe, startColloquy, type ColloquyServer } from './colloquy.js';
import { round, type Row, type RunOptions, type Scenario, type ScenarioResult, type GoalCheck } from './harness.js';
import { compareSaturation, runFixedRate, runSaturation, type LoadRequest, type LoadResult } from './load.js';
import { hasRedisServer, startBenchRedis, type BenchRedis } from './redis.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';
import { loadRow } from './scenario-health.js';

type Request = Omit<LoadRequest, 'connections' | 'durationSeconds'>;

/** The gateway request aimed at another server (same path, same bodies). */
function aimedAt(request: Request, fromUrl: string, toUrl: string): Request {
  return { ...request, url: request.url.replace(fromUrl, toUrl) };
}

/**
 * Rows comparing the gateway chat on LMDB (the scenario's server) with the same on Redis
 * (`appendfsync always`, then `everysec`): 1000 req/s open loop and saturation, alternated.
 */
export async function redisGatewayRows(
  options: RunOptions,
  lmdb: { url: string; request: Request },
  serverOptions: Parameters<typeof startColloquy>[0],
): Promise<{ rows: Row[]; goals: GoalCheck[]; notes: string[] }> {
  if (!hasRedisServer()) return { rows: [], goals: [], notes: ['Redis rows skipped: redis-server is not installed'] };
  const started: Array<{ redis: BenchRedis; server: ColloquyServer; name: string }> = [];
  try {
    for (const appendfsync of ['always', 'everysec'] as const) {
      const redis = await startBenchRedis(appendfsync);
      const server = await startColloquy({ ...serverOptions, env: { COLLOQUY_REDIS_URL: redis.url, COLLOQUY_REDIS_PREFIX: 'bench:' } });
      started.push({ redis, server, name: `through colloquy, Redis appendfsync ${appendfsync}` });
    }
    const targets = [
      { name: 'through colloquy, LMDB', request: lmdb.request },
      ...started.map(({ server, name }) => ({ name, request: aimedAt(lmdb.request, lmdb.url, server.url) })),
    ];
    for (const target of targets.slice(1)) {
      const check = await probe(target.request.url, JSON.parse(target.request.bodies?.[0] ?? '{}'));
      if (check.status !== 200) throw new Error(`${target.name}: the probe answered ${check.status}`);
    }
    const connections = 32;
    const seconds = options.duration;
    for (const target of targets) await runFixedRate({ ...target.request, connections, durationSeconds: 1, rate: 1000 });
    // At 1000 req/s, alternated twice, the better p50 of each kept (the machine's noise is large).
    const fixed = new Map<string, LoadResult>();
    for (let turn = 0; turn < (options.quick ? 1 : 2); turn += 1) {
      for (const target of targets) {
        const result = await runFixedRate({ ...target.request, connections, durationSeconds: seconds, rate: 1000 });
        const previous = fixed.get(target.name);
        if (!previous || result.p50_ms < previous.p50_ms) fixed.set(target.name, result);
      }
    }
    const saturation = await compareSaturation(
      targets.map((target) => ({ name: target.name, request: { ...target.request, connections: 50, durationSeconds: seconds } })),
      options.quick ? 1 : 2,
      1,
    );
    const rows: Row[] = [];
    const base = fixed.get('through colloquy, LMDB')!;
    const baseMax = saturation.get('through colloquy, LMDB')!;
    for (const target of targets) {
      const result = fixed.get(target.name)!;
      rows.push(
        loadRow(target.name, result, {
          load: '1000 req/s',
          'vs LMDB +p50 ms': round(result.p50_ms - base.p50_ms, 3),
          'vs LMDB +p99 ms': round(result.p99_ms - base.p99_ms, 3),
        }),
      );
    }
    for (const target of targets) {
      const result = saturation.get(target.name)!;
      rows.push(loadRow(target.name, result, { load: 'saturation', 'ratio to LMDB': round(result.rps / baseMax.rps, 3) }));
    }
    const always = saturation.get(targets[1]!.name)!;
    const everysec = saturation.get(targets[2]!.name)!;
    return {
      rows,
      goals: [
        {
          goal: 'Redis (appendfsync always): no errors under saturation',
          measured: `${always.rps} req/s, ${round(always.rps / baseMax.rps, 3)}× LMDB; everysec ${everysec.rps} req/s (${round(everysec.rps / baseMax.rps, 3)}×)`,
          met: always.errors === 0 && always.non2xx === 0 && everysec.errors === 0 && everysec.non2xx === 0,
        },
      ],
      notes: [
        'Redis rows: the same gateway chat with the server on a loopback redis-server (AOF on, maxmemory-policy noeviction, pinned to the server core with the node); every request takes its quota unit with a Lua script and appends a usage record there',
      ],
    };
  } finally {
    for (const { redis, server } of started) {
      await server.stop();
      await redis.stop();
    }
  }
}

/** Sessions the load rotates through (each chat appends a turn pair to one of them). */
const SESSIONS = 1000;

/** Runs saturating load against every URL at once; the connections are split between them. */
async function saturateAll(requests: LoadRequest[]): Promise<{ total: number; results: LoadResult[] }> {
  const results = await Promise.all(requests.map((request) => runSaturation(request)));
  return { total: results.reduce((sum, result) => sum + result.rps, 0), results };
}

export const redisNodesScenario: Scenario = {
  id: 'redis-nodes',
  number: 11,
  title: 'built-in chat: three nodes on one Redis vs one node on it',
  async run(options: RunOptions): Promise<ScenarioResult> {
    if (!hasRedisServer()) return { rows: [], goals: [], notes: ['skipped: redis-server is not installed'] };
    const redis = await startBenchRedis('always');
    const nodes: ColloquyServer[] = [];
    try {
      for (let index = 0; index < 3; index += 1)
        nodes.push(await startColloquy({ env: { COLLOQUY_REDIS_URL: redis.url, COLLOQUY_REDIS_PREFIX: 'bench-nodes:' } }));
      const bodies = Array.from({ length: SESSIONS }, (_, index) =>
        JSON.stringify({ message: 'What does Colloquy store for a session?', model: 'builtin-extractive', session_id: `nodes-${index}` }),
      );
      const check = await probe(`${nodes[0]!.url}/api/chat/`, JSON.parse(bodies[0]!));
      const skipped = skippedUnlessReady('POST /api/chat/ (builtin, Redis)', check.status, check.body);
      if (skipped) return skipped;
      const request = (url: string, connections: number): LoadRequest => ({
        url: `${url}/api/chat/`,
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        bodies,
        connections,
        durationSeconds: options.duration,
      });
      const connections = 48;
      // Warm every node.
      await saturateAll(nodes.map((node) => request(node.url, connections / 3)).map((step) => ({ ...step, durationSeconds: 1 })));
      let one: LoadResult | undefined;
      let three: { total: number; results: LoadResult[] } | undefined;
      for (let turn = 0; turn < (options.quick ? 1 : 2); turn += 1) {
        const single = await runSaturation(request(nodes[0]!.url, connections));
        if (!one || single.rps > one.rps) one = single;
        const spread = await saturateAll(nodes.map((node) => request(node.url, connections / 3)));
        if (!three || spread.total > three.total) three = spread;
      }
      if (!one || !three) throw new Error('the load steps did not run');
      const ratio = round(three.total / one.rps, 3);
      const worst = (pick: (result: LoadResult) => number) => Math.max(...three!.results.map(pick));
      const errors = three.results.reduce((sum, result) => sum + result.errors + result.non2xx, 0);
      const quota = await fetch(`${nodes[1]!.url}/api/chat/session/nodes-1`);
      const stored = quota.status === 200 ? ((await quota.json()) as { message_count?: number }).message_count : undefined;
      return {
        rows: [
          loadRow('one node on Redis', one, { connections, ratio: 1 }),
          {
            target: 'three nodes on one Redis (sum)',
            tool: three.results[0]!.tool,
            'req/s': round(three.total, 0),
            'p50 ms': worst((result) => result.p50_ms),
            'p99 ms': worst((result) => result.p99_ms),
            errors: three.results.reduce((sum, result) => sum + result.errors, 0),
            non2xx: three.results.reduce((sum, result) => sum + result.non2xx, 0),
            connections,
            ratio,
          },
          ...three.results.map((result, index) => loadRow(`  node ${index + 1} of three`, result, { connections: connections / 3 })),
        ],
        goals: [
          {
            goal: 'three nodes on one Redis serve built-in chat without errors',
            measured: `${round(three.total, 0)} req/s over three nodes vs ${one.rps} on one (${ratio}×)`,
            met: errors === 0 && one.errors === 0 && one.non2xx === 0,
          },
        ],
        notes: [
          'built-in chat, anonymous caller (one quota counter shared by every node, taken by a Lua script), each request appending a turn pair to one of 1000 sessions in Redis (appendfsync always)',
          'every node and redis-server share the server core (the load generators the other): the ratio is the cost of spreading one core over three processes and one Redis, not a scale-out figure — on one machine per node, throughput adds up until Redis itself saturates',
          stored === undefined
            ? `session read-back answered ${quota.status}`
            : `session nodes-1 read through node 2 holds ${stored} messages`,
        ],
      };
    } finally {
      for (const node of nodes) await node.stop();
      await redis.stop();
    }
  },
};
