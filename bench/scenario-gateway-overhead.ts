/**
 * Scenario 3: chat through the `openai` provider to a loopback mock upstream against calling the
 * same mock directly, at fixed rates (1k, 5k req/s) and at saturation. The direct baseline asks
 * the mock for the same kind of reply (SSE or JSON) that the gateway asks for, so the difference
 * is the gateway alone. The same request through the OpenAI-compatible `/v1/chat/completions` is
 * measured beside `/api/chat/`, in the same runs, so the two surfaces' costs compare directly.
 */
import { existsSync } from 'node:fs';
import { MOCK_MODEL_ID, probe, startColloquy } from './colloquy.js';
import {
  round,
  signed,
  scratchDir,
  startGatewayMock,
  startNodeHelper,
  type Row,
  type RunOptions,
  type Scenario,
  type ScenarioResult,
} from './harness.js';
import { compareSaturation, runFixedRate, type LoadRequest, type LoadResult } from './load.js';
import type { MockStats } from './mock-upstream.js';
import { skippedUnlessReady } from './scenario-builtin-chat.js';
import { loadRow } from './scenario-health.js';
import { redisGatewayRows } from './scenario-redis.js';

const RATES = [1000, 5000];
/** A model whose upstream is gone (nothing listens on loopback port 1), falling back to the mock. */
export const DEAD_PRIMARY_ID = 'dead-primary';
const DEAD_PRIMARY = {
  id: DEAD_PRIMARY_ID,
  provider: 'openai',
  base_url: 'http://127.0.0.1:1/v1',
  fallbacks: [MOCK_MODEL_ID],
  cooldown_after: 1,
  cooldown_s: 3600,
};
const MESSAGE = 'Say hello to the benchmark.';
/** The reference row: the barest proxy on the same libraries, not a goal. */
const BARE_ROW = 'bare uWS + undici proxy (reference)';
const BARE_QUOTA_ROW = 'bare proxy + LMDB quota take (reference)';

/** Reads the mock's counters. */
export async function mockStats(port: number): Promise<MockStats> {
  const response = await fetch(`http://127.0.0.1:${port}/_stats`);
  return (await response.json()) as MockStats;
}

/** The gateway and direct requests for one mock; which upstream mode the gateway uses is probed. */
export async function gatewayTargets(
  serverUrl: string,
  mockPort: number,
): Promise<{
  gateway: Omit<LoadRequest, 'connections' | 'durationSeconds'>;
  /** The same chat through /v1/chat/completions. */
  v1: Omit<LoadRequest, 'connections' | 'durationSeconds'>;
  direct: Omit<LoadRequest, 'connections' | 'durationSeconds'>;
  upstreamStreams: boolean;
  probeStatus: number;
  probeBody: unknown;
}> {
  const before = await mockStats(mockPort);
  const check = await probe(`${serverUrl}/api/chat/`, { message: MESSAGE, model: MOCK_MODEL_ID });
  const after = await mockStats(mockPort);
  const upstreamStreams = after.stream_requests > before.stream_requests;
  const json = { 'Content-Type': 'application/json' };
  return {
    gateway: {
      url: `${serverUrl}/api/chat/`,
      method: 'POST',
      headers: json,
      bodies: [JSON.stringify({ message: MESSAGE, model: MOCK_MODEL_ID })],
    },
    v1: {
      url: `${serverUrl}/v1/chat/completions`,
      method: 'POST',
      headers: json,
      bodies: [JSON.stringify({ model: MOCK_MODEL_ID, messages: [{ role: 'user', content: MESSAGE }] })],
    },
    direct: {
      url: `http://127.0.0.1:${mockPort}/v1/chat/completions`,
      method: 'POST',
      headers: { ...json, Authorization: 'Bearer sk-bench-loopback' },
      bodies: [JSON.stringify({ model: MOCK_MODEL_ID, messages: [{ role: 'user', content: MESSAGE }], stream: upstreamStreams })],
    },
    upstreamStreams,
    probeStatus: check.status,
    probeBody: check.body,
  };
}

function added(gateway: LoadResult, direct: LoadResult): Row {
  return { '+p50 ms': round(gateway.p50_ms - direct.p50_ms, 3), '+p99 ms': round(gateway.p99_ms - direct.p99_ms, 3) };
}

/** A memory-backed file system, where a flush costs nothing (Linux). */
const TMPFS = '/dev/shm';

export const gatewayOverheadScenario: Scenario = {
  id: 'gateway-overhead',
  number: 3,
  title: 'gateway overhead: openai provider to a loopback mock vs the mock directly',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const mock = await startGatewayMock();
    const server = await startColloquy({ upstreamPort: mock.port, profileDir: options.profileDir, extraModels: [DEAD_PRIMARY] });
    // The floors: the same exchange through the barest uWS + undici proxy, pinned like the server,
    // alone and with the service's quota take and usage record on LMDB.
    const bare = await startNodeHelper('bare-proxy', 'server', 'bare-proxy.js', ['--upstream', String(mock.port)]);
    const bareData = scratchDir('bare-proxy');
    const bareQuota = await startNodeHelper('bare-proxy-quota', 'server', 'bare-proxy.js', [
      '--upstream',
      String(mock.port),
      '--quota',
      bareData.path,
    ]);
    try {
      const targets = await gatewayTargets(server.url, mock.port);
      const skipped = skippedUnlessReady('POST /api/chat/ (openai provider)', targets.probeStatus, targets.probeBody);
      if (skipped) return skipped;
      const rows: Row[] = [];
      const goals = [];
      const connections = 32;
      const seconds = options.duration;
      // Warm both paths (JIT, keep-alive pools) before measuring.
      await runFixedRate({ ...targets.direct, connections, durationSeconds: 1, rate: 1000 });
      await runFixedRate({ ...targets.gateway, connections, durationSeconds: options.quick ? 1 : 2, rate: 2000 });
      await runFixedRate({ ...targets.v1, connections, durationSeconds: 1, rate: 2000 });
      const bareTarget = { ...targets.gateway, url: `http://127.0.0.1:${bare.port}/` };
      const bareQuotaTarget = { ...targets.gateway, url: `http://127.0.0.1:${bareQuota.port}/` };
      await runFixedRate({ ...bareTarget, connections, durationSeconds: 1, rate: 2000 });
      await runFixedRate({ ...bareQuotaTarget, connections, durationSeconds: 1, rate: 2000 });
      // Saturation first: it also tells which fixed rate is half the gateway's capacity.
      const best = await compareSaturation(
        [
          { name: 'mock directly', request: { ...targets.direct, connections: 50, durationSeconds: seconds } },
          { name: 'through colloquy', request: { ...targets.gateway, connections: 50, durationSeconds: seconds } },
          { name: 'through colloquy /v1', request: { ...targets.v1, connections: 50, durationSeconds: seconds } },
          { name: 'bare proxy', request: { ...bareTarget, connections: 50, durationSeconds: seconds } },
          { name: 'bare proxy + quota', request: { ...bareQuotaTarget, connections: 50, durationSeconds: seconds } },
        ],
        options.quick ? 1 : 2,
        1,
      );
      const directMax = best.get('mock directly')!;
      const gatewayMax = best.get('through colloquy')!;
      const v1Max = best.get('through colloquy /v1')!;
      const bareMax = best.get('bare proxy')!;
      const bareQuotaMax = best.get('bare proxy + quota')!;
      const ratio = round(gatewayMax.rps / directMax.rps, 3);
      // Added latency at half the gateway's own saturation: the hop's cost when it is not queueing.
      const half = Math.max(100, Math.round(gatewayMax.rps / 2 / 100) * 100);
      // Ascending, so the overloaded step (if any) comes last and leaves no backlog behind.
      const steps = [
        ...RATES.map((rate) => ({ rate, label: `${rate} req/s` })),
        { rate: half, label: `${half} req/s (½ of its saturation)` },
      ].sort((a, b) => a.rate - b.rate);
      // A dead primary cooling down in front of the mock: its one failure starts the cool-down, then
      // every request goes straight to the fallback. Compared at 1k req/s with asking the mock's model.
      const deadPrimary = { ...targets.gateway, bodies: [JSON.stringify({ message: MESSAGE, model: DEAD_PRIMARY_ID })] };
      await probe(`${server.url}/api/chat/`, { message: MESSAGE, model: DEAD_PRIMARY_ID });
      await runFixedRate({ ...deadPrimary, connections, durationSeconds: 1, rate: 1000 });
      // Alternated twice, the better run of each kept: the machine's noise is larger than the difference.
      const better = (a: LoadResult | undefined, b: LoadResult): LoadResult => (a && a.p50_ms <= b.p50_ms ? a : b);
      let fallbackDirect: LoadResult | undefined;
      let fallbackVia: LoadResult | undefined;
      for (let round = 0; round < 2; round += 1) {
        fallbackDirect = better(
          fallbackDirect,
          await runFixedRate({ ...targets.gateway, connections, durationSeconds: seconds, rate: 1000 }),
        );
        fallbackVia = better(fallbackVia, await runFixedRate({ ...deadPrimary, connections, durationSeconds: seconds, rate: 1000 }));
      }
      if (!fallbackDirect || !fallbackVia) throw new Error('the fallback rows did not run');
      rows.push(loadRow('colloquy, model = the fallback', fallbackDirect, { load: '1000 req/s' }));
      rows.push(
        loadRow('colloquy, dead primary cooling down', fallbackVia, {
          load: '1000 req/s',
          '+p50 ms': round(fallbackVia.p50_ms - fallbackDirect.p50_ms, 3),
          '+p99 ms': round(fallbackVia.p99_ms - fallbackDirect.p99_ms, 3),
        }),
      );
      const coolingCost = round(fallbackVia.p50_ms - fallbackDirect.p50_ms, 3);
      goals.push({
        goal: 'dead primary cooling down: added p50 ≤ 1 ms over asking the fallback directly',
        measured: `${signed(coolingCost)} ms p50 (${fallbackVia.non2xx} non-2xx)`,
        met: coolingCost <= 1 && fallbackVia.non2xx === 0,
      });
      let direct1k: LoadResult | undefined;
      for (const { rate, label } of steps) {
        const direct = await runFixedRate({ ...targets.direct, connections, durationSeconds: seconds, rate });
        const gateway = await runFixedRate({ ...targets.gateway, connections, durationSeconds: seconds, rate });
        const v1 = await runFixedRate({ ...targets.v1, connections, durationSeconds: seconds, rate });
        const floor = rate === 1000 ? await runFixedRate({ ...bareTarget, connections, durationSeconds: seconds, rate }) : undefined;
        const floorQuota =
          rate === 1000 ? await runFixedRate({ ...bareQuotaTarget, connections, durationSeconds: seconds, rate }) : undefined;
        rows.push(loadRow('mock directly', direct, { load: label }));
        rows.push(loadRow('through colloquy', gateway, { load: label, ...added(gateway, direct) }));
        rows.push(loadRow('through colloquy /v1', v1, { load: label, ...added(v1, direct) }));
        if (floor) rows.push(loadRow(BARE_ROW, floor, { load: label, ...added(floor, direct) }));
        if (floorQuota) rows.push(loadRow(BARE_QUOTA_ROW, floorQuota, { load: label, ...added(floorQuota, direct) }));
        if (rate === 1000 && label === '1000 req/s') {
          direct1k = direct;
          const extra50 = round(gateway.p50_ms - direct.p50_ms, 3);
          const extra99 = round(gateway.p99_ms - direct.p99_ms, 3);
          goals.push({
            goal: 'added latency at 1k req/s ≤ +0.5 ms p50, ≤ +2 ms p99',
            measured: `${signed(extra50)} ms p50, ${signed(extra99)} ms p99`,
            met: extra50 <= 0.5 && extra99 <= 2 && gateway.non2xx === 0 && gateway.errors === 0,
          });
        }
      }
      rows.push(loadRow('mock directly', directMax, { load: 'saturation', ratio: 1 }));
      rows.push(loadRow('through colloquy', gatewayMax, { load: 'saturation', ...added(gatewayMax, directMax), ratio }));
      rows.push(
        loadRow('through colloquy /v1', v1Max, {
          load: 'saturation',
          ...added(v1Max, directMax),
          ratio: round(v1Max.rps / directMax.rps, 3),
        }),
      );
      rows.push(
        loadRow(BARE_ROW, bareMax, { load: 'saturation', ...added(bareMax, directMax), ratio: round(bareMax.rps / directMax.rps, 3) }),
      );
      rows.push(
        loadRow(BARE_QUOTA_ROW, bareQuotaMax, {
          load: 'saturation',
          ...added(bareQuotaMax, directMax),
          ratio: round(bareQuotaMax.rps / directMax.rps, 3),
        }),
      );
      goals.push({
        goal: 'gateway saturation ≥ 0.5× the mock directly',
        measured: `${ratio}× (${gatewayMax.rps} vs ${directMax.rps} req/s)`,
        met: ratio >= 0.5 && gatewayMax.non2xx === 0,
      });
      // The /v1 surface's cost over /api: CPU per request at saturation is 1/throughput.
      const v1Cost = round(gatewayMax.rps / v1Max.rps, 3);
      goals.push({
        goal: '/v1/chat/completions costs ≤ 5% over /api/chat/ (saturation)',
        measured: `${v1Cost}× the /api cost (${v1Max.rps} vs ${gatewayMax.rps} req/s)`,
        met: v1Cost <= 1.05 && v1Max.non2xx === 0,
      });
      // The same gateway chat with the server on Redis (appendfsync always and everysec), same run.
      const redis = await redisGatewayRows(
        options,
        { url: server.url, request: targets.gateway },
        { upstreamPort: mock.port, extraModels: [DEAD_PRIMARY] },
      );
      rows.push(...redis.rows);
      goals.push(...redis.goals);
      // How much of the added latency is the disk's flush of the quota commit: the same chat with
      // the data directory on tmpfs (an fsync there returns at once), alternated with the disk.
      const flushNotes: string[] = [];
      if (direct1k && existsSync(TMPFS)) {
        const onTmpfs = await startColloquy({ upstreamPort: mock.port, dataParent: TMPFS, extraModels: [DEAD_PRIMARY] });
        try {
          const tmpfsTarget = { ...targets.gateway, url: `${onTmpfs.url}/api/chat/` };
          await runFixedRate({ ...tmpfsTarget, connections, durationSeconds: 1, rate: 1000 });
          const better = (a: LoadResult | undefined, b: LoadResult): LoadResult => (a && a.p50_ms <= b.p50_ms ? a : b);
          let disk: LoadResult | undefined;
          let memory: LoadResult | undefined;
          for (let round = 0; round < 2; round += 1) {
            disk = better(disk, await runFixedRate({ ...targets.gateway, connections, durationSeconds: seconds, rate: 1000 }));
            memory = better(memory, await runFixedRate({ ...tmpfsTarget, connections, durationSeconds: seconds, rate: 1000 }));
          }
          rows.push(loadRow('through colloquy, data on disk', disk!, { load: '1000 req/s', ...added(disk!, direct1k) }));
          rows.push(loadRow('through colloquy, data on tmpfs (flush free)', memory!, { load: '1000 req/s', ...added(memory!, direct1k) }));
          flushNotes.push(
            `data on disk vs tmpfs at 1000 req/s (better of two alternated runs each, +p50/+p99 against the mock directly at 1000 req/s): the difference is the time the reply waits for the durable commit (fsync) of the quota take on this machine's disk`,
          );
        } finally {
          await onTmpfs.stop();
        }
      }
      const direct = directMax;
      const stats = await mockStats(mock.port);
      return {
        rows,
        goals,
        notes: [
          `gateway asks the upstream for ${targets.upstreamStreams ? 'SSE (stream: true)' : 'one JSON body'}; the direct baseline asks for the same`,
          `fixed rates: open-loop generator (requests due at start + i/rate, released in 1 ms ticks, latency counted from the due time, up to 512 keep-alive connections); saturation: ${direct.tool}, 50 connections; throughput ratio ${ratio}×`,
          `mock upstream saw ${stats.requests} requests, ${stats.streams_closed_early} closed early`,
          `${BARE_ROW}: bench/bare-proxy.ts, uWS and one undici Pool asking the mock for the same stream (parsed with eventsource-parser) and answering JSON, with no quota, storage, validation, timeouts, logging or metrics (the part of the hop every gateway on these libraries pays); ${BARE_QUOTA_ROW}: the same with the service's own LMDB quota take (decided before the upstream request, durable before the reply) and usage record; Colloquy's saturation is ${round(gatewayMax.rps / bareMax.rps, 3)}× of the first and ${round(gatewayMax.rps / bareQuotaMax.rps, 3)}× of the second`,
          ...redis.notes,
          ...flushNotes,
        ],
      };
    } finally {
      await server.stop();
      await bare.child.stop();
      await bareQuota.child.stop();
      bareData.remove();
      await mock.child.stop();
    }
  },
};
