/**
 * In-process microbenchmark of the streamed upstream client alone: N streamed chat calls, C at a
 * time, through UpstreamClient + readSse (the provider's read loop, stopping at `[DONE]` as the
 * openai provider does) against the loopback mock upstream running as a child process, so the CPU
 * time this process reports is the client's own. Prints CPU µs per call (user + system) and the
 * wall-clock rate; stops by itself.
 *
 *   node dist/bench/upstream-client.js [--calls 5000] [--concurrency 20] [--chunks 8] [--size 6] [--warmup 500]
 */
import { type Dialect, type EventSourceMessage, readSse } from '../src/upstream/frames.js';
import { UpstreamClient } from '../src/upstream/stream-call.js';
import { round, startNodeHelper, stopAllChildren } from './harness.js';

function argValue(name: string, fallback: number): number {
  const index = process.argv.indexOf(name);
  return index >= 0 && process.argv[index + 1] !== undefined ? Number(process.argv[index + 1]) : fallback;
}

const calls = argValue('--calls', 5000);
const concurrency = argValue('--concurrency', 20);
const chunks = argValue('--chunks', 8);
/** Characters of content per chunk. */
const size = argValue('--size', 6);
const warmup = argValue('--warmup', 500);
const MAX_FRAME_BYTES = 1024 * 1024;

const mock = await startNodeHelper('mock upstream', 'load', 'mock-upstream.js', [
  '--port',
  '0',
  '--chunks',
  String(chunks),
  '--interval-ms',
  '0',
  '--size',
  String(size),
]);
const client = new UpstreamClient({
  connectTimeoutMs: 5000,
  firstByteTimeoutMs: 10_000,
  idleTimeoutMs: 10_000,
  retries: 0,
  maxFrameBytes: MAX_FRAME_BYTES,
});
const call = {
  subject: 'bench',
  url: `http://127.0.0.1:${mock.port}/v1/chat/completions`,
  headers: { accept: 'text/event-stream', authorization: 'Bearer sk-bench-loopback' },
  body: { model: 'mock-gpt', stream: true, messages: [{ role: 'user', content: 'Say hello to the benchmark.' }] },
};

/** A dialect that counts data frames up to `[DONE]`. */
const countFrames: Dialect<EventSourceMessage, 1> = {
  frame(frame, out) {
    if (frame.data === '[DONE]') return true;
    out.push(1);
    return false;
  },
  end(_out, terminal) {
    if (!terminal) throw new Error('the stream ended without [DONE]');
  },
};

/** One streamed call read the way a provider reads it; returns the number of data frames seen. */
async function oneCall(): Promise<number> {
  const signal = new AbortController().signal;
  let frames = 0;
  for await (const batch of readSse(client.stream(call, signal), countFrames, 'bench', MAX_FRAME_BYTES)) frames += batch.length;
  return frames;
}

/** Runs `total` calls with `concurrency` in flight; returns the frames seen in all. */
async function run(total: number): Promise<number> {
  let started = 0;
  let frames = 0;
  const lane = async () => {
    while (started < total) {
      started += 1;
      const seen = await oneCall();
      frames += seen;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, lane));
  return frames;
}

try {
  await run(warmup);
  const cpuBefore = process.cpuUsage();
  const wallBefore = performance.now();
  const frames = await run(calls);
  const wall = (performance.now() - wallBefore) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const expected = calls * (chunks + 2);
  if (frames !== expected) throw new Error(`expected ${expected} frames, saw ${frames}`);
  process.stdout.write(
    `${JSON.stringify({
      calls,
      concurrency,
      chunks,
      size,
      cpu_us_per_call: round((cpu.user + cpu.system) / calls, 1),
      user_us_per_call: round(cpu.user / calls, 1),
      system_us_per_call: round(cpu.system / calls, 1),
      calls_per_s: round(calls / wall, 0),
    })}\n`,
  );
} finally {
  await client.close();
  await stopAllChildren();
}
