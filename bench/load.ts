/**
 * Load generators, always started as a child pinned to the load core: wrk (closed loop, fastest,
 * used for saturation when installed) and autocannon (fixed request rates, and saturation when wrk
 * is missing). Both report latency with sub-millisecond resolution.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIST, round, scratchDir, startChild, wrkVersion } from './harness.js';

export interface LoadRequest {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** Request bodies used in rotation (POST). */
  bodies?: string[];
  connections: number;
  durationSeconds: number;
  /** Fixed overall request rate (autocannon only); absent means as fast as the server answers. */
  rate?: number;
}

/** What one load step measured. */
export interface LoadResult {
  tool: string;
  requests: number;
  rps: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  max_ms: number;
  mean_ms: number;
  /** Socket errors and timeouts. */
  errors: number;
  /** Responses outside 2xx. */
  non2xx: number;
}

/** Runs one open-loop step at a fixed rate (in a pinned child, see open-loop.ts). */
export async function runFixedRate(request: LoadRequest & { rate: number }): Promise<LoadResult> {
  let output: LoadResult | undefined;
  const child = startChild('open-loop', 'load', process.execPath, [join(BENCH_DIST, 'open-loop.js'), JSON.stringify(request)], {
    onLine: (line) => {
      if (line.startsWith('{"tool":')) output = JSON.parse(line) as LoadResult;
    },
  });
  await new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  await child.stop();
  if (!output) throw new Error(`open-loop generator failed: ${child.stderr()}`);
  return output;
}

/** Runs one step with autocannon (in a pinned child, see load-worker.ts). */
export async function runAutocannon(request: LoadRequest): Promise<LoadResult> {
  let output: LoadResult | undefined;
  const child = startChild('autocannon', 'load', process.execPath, [join(BENCH_DIST, 'load-worker.js'), JSON.stringify(request)], {
    onLine: (line) => {
      if (line.startsWith('{"tool":')) output = JSON.parse(line) as LoadResult;
    },
  });
  await new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  await child.stop();
  if (!output) throw new Error(`autocannon worker failed: ${child.stderr()}`);
  return output;
}

function luaLongString(text: string): string {
  let level = '=';
  while (text.includes(`]${level}]`)) level += '=';
  return `[${level}[${text}]${level}]`;
}

function wrkScript(request: LoadRequest): string {
  const lines: string[] = [];
  lines.push(`wrk.method = "${request.method ?? 'GET'}"`);
  for (const [name, value] of Object.entries(request.headers ?? {}))
    lines.push(`wrk.headers[ ${luaLongString(name)} ] = ${luaLongString(value)}`);
  const bodies = request.bodies ?? [];
  if (bodies.length === 1) {
    lines.push(`wrk.body = ${luaLongString(bodies[0]!)}`);
  } else if (bodies.length > 1) {
    lines.push(`local bodies = { ${bodies.map(luaLongString).join(', ')} }`);
    lines.push('local i = 0');
    lines.push('request = function()');
    lines.push('  i = i + 1');
    lines.push('  return wrk.format(nil, nil, nil, bodies[(i % #bodies) + 1])');
    lines.push('end');
  }
  lines.push('done = function(summary, latency, requests)');
  lines.push('  local e = summary.errors');
  lines.push(
    `  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\\n', summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))`,
  );
  lines.push('end');
  return `${lines.join('\n')}\n`;
}

interface WrkJson {
  requests: number;
  duration_us: number;
  connect: number;
  read: number;
  write: number;
  status: number;
  timeout: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
  mean_us: number;
}

/** Runs one closed-loop step with wrk (one thread, pinned). */
async function runWrk(request: LoadRequest): Promise<LoadResult> {
  const scratch = scratchDir('wrk');
  try {
    const script = join(scratch.path, 'script.lua');
    writeFileSync(script, wrkScript(request));
    let output: WrkJson | undefined;
    const child = startChild(
      'wrk',
      'load',
      'wrk',
      ['-t1', `-c${request.connections}`, `-d${request.durationSeconds}s`, '-s', script, request.url],
      {
        onLine: (line) => {
          if (line.startsWith('WRKJSON ')) output = JSON.parse(line.slice(8)) as WrkJson;
        },
      },
    );
    await new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
    await child.stop();
    if (!output) throw new Error(`wrk failed: ${child.stderr()}`);
    const seconds = output.duration_us / 1e6;
    return {
      tool: wrkVersion() ?? 'wrk',
      requests: output.requests,
      rps: round(output.requests / seconds, 0),
      p50_ms: round(output.p50_us / 1000, 3),
      p90_ms: round(output.p90_us / 1000, 3),
      p99_ms: round(output.p99_us / 1000, 3),
      max_ms: round(output.max_us / 1000, 3),
      mean_ms: round(output.mean_us / 1000, 3),
      errors: output.connect + output.read + output.write + output.timeout,
      non2xx: output.status,
    };
  } finally {
    scratch.remove();
  }
}

/** Saturation step: wrk when installed (autocannon tops out below a bare uWS server), else autocannon. */
export function runSaturation(request: LoadRequest): Promise<LoadResult> {
  return wrkVersion() ? runWrk(request) : runAutocannon(request);
}

/** A named target for an A/B saturation comparison. */
export interface Target {
  name: string;
  request: LoadRequest;
}

/**
 * Runs the targets alternately (A, B, A, B…) so drift on a shared machine hits both alike, after a
 * short warm-up each, and keeps each target's best step.
 */
export async function compareSaturation(targets: Target[], rounds: number, warmupSeconds: number): Promise<Map<string, LoadResult>> {
  for (const target of targets) await runSaturation({ ...target.request, durationSeconds: warmupSeconds });
  const best = new Map<string, LoadResult>();
  for (let round = 0; round < rounds; round += 1) {
    for (const target of targets) {
      const result = await runSaturation(target.request);
      const previous = best.get(target.name);
      if (!previous || result.rps > previous.rps) best.set(target.name, result);
    }
  }
  return best;
}
