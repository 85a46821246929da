/**
 * An open-loop, fixed-rate load generator (child entry, pinned to the load core). autocannon's
 * "rate" sends each connection's share of a second as a closed-loop burst and then idles, which
 * measures queueing in the burst, not latency at a rate. Here requests are due at start + i/rate
 * whether or not earlier ones finished (coordinated omission is avoided: latency counts from the
 * moment a request was due), spread over a pool of keep-alive connections, one request in flight
 * per connection (uWS closes pipelined requests).
 * Usage: node dist/bench/open-loop.js '<LoadRequest JSON with rate>'
 */
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { percentile, round } from './harness.js';
import type { LoadRequest, LoadResult } from './load.js';

const TICK_MS = 1;
const MAX_CONNECTIONS = 512;

interface Pending {
  dueAt: number;
}

/** One keep-alive connection with a response parser for Content-Length and chunked bodies. */
class Connection {
  readonly socket: Socket;
  busy = false;
  ready = false;
  private current: Pending | undefined;
  private buffer = '';
  private headDone = false;
  private status = 0;
  private contentLength = -1;
  private chunked = false;

  constructor(
    port: number,
    private readonly onReady: (connection: Connection) => void,
    private readonly onDone: (connection: Connection, pending: Pending, status: number) => void,
    private readonly onBroken: (connection: Connection, pending: Pending | undefined) => void,
  ) {
    this.socket = connect({ port, host: '127.0.0.1', noDelay: true });
    this.socket.setEncoding('latin1');
    this.socket.on('connect', () => {
      this.ready = true;
      this.onReady(this);
    });
    this.socket.on('data', (text: string) => this.onData(text));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => this.onBroken(this, this.current));
  }

  send(pending: Pending, bytes: Buffer): void {
    this.busy = true;
    this.current = pending;
    this.buffer = '';
    this.headDone = false;
    this.socket.write(bytes);
  }

  private onData(text: string): void {
    this.buffer += text;
    if (!this.headDone) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 4);
      this.headDone = true;
      this.status = Number(head.slice(9, 12));
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      this.contentLength = length ? Number(length[1]) : -1;
      this.chunked = /\r\ntransfer-encoding:\s*chunked/i.test(head);
    }
    if (this.chunked ? this.chunkedComplete() : this.buffer.length >= Math.max(0, this.contentLength)) {
      const pending = this.current!;
      this.current = undefined;
      this.busy = false;
      this.onDone(this, pending, this.status);
    }
  }

  /** True once the zero-size last chunk and its blank line arrived (chunk sizes are walked, not searched). */
  private chunkedComplete(): boolean {
    let offset = 0;
    for (;;) {
      const lineEnd = this.buffer.indexOf('\r\n', offset);
      if (lineEnd < 0) return false;
      const size = parseInt(this.buffer.slice(offset, lineEnd), 16);
      if (size === 0) return this.buffer.indexOf('\r\n', lineEnd + 2) >= 0;
      offset = lineEnd + 2 + size + 2;
      if (offset > this.buffer.length) return false;
    }
  }
}

/** Runs one fixed-rate step and resolves with its figures. */
export function runOpenLoop(request: LoadRequest & { rate: number }): Promise<LoadResult> {
  const url = new URL(request.url);
  const port = Number(url.port);
  const bodies = (request.bodies ?? []).map((body) => Buffer.from(body));
  const headerText = (body: Buffer | undefined) => {
    const lines = [`${request.method ?? 'GET'} ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`];
    for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`${name}: ${value}`);
    if (body) lines.push(`Content-Length: ${body.length}`);
    return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`);
  };
  const payloads = bodies.length > 0 ? bodies.map((body) => Buffer.concat([headerText(body), body])) : [headerText(undefined)];

  return new Promise((resolve) => {
    const idle: Connection[] = [];
    const all = new Set<Connection>();
    const queue: Pending[] = [];
    let samples = new Float64Array(1 << 16);
    let count = 0;
    let non2xx = 0;
    let errors = 0;
    let sent = 0;
    let connecting = 0;
    const start = performance.now() + 200;
    const end = start + request.durationSeconds * 1000;
    const total = Math.floor(request.rate * request.durationSeconds);
    let finished = false;
    let forced = false;
    let issued = 0;

    const record = (latency: number) => {
      if (count === samples.length) {
        const grown = new Float64Array(samples.length * 2);
        grown.set(samples);
        samples = grown;
      }
      samples[count++] = latency;
    };
    const dispatch = () => {
      while (queue.length > 0 && idle.length > 0) {
        const connection = idle.pop()!;
        const pending = queue.shift()!;
        connection.send(pending, payloads[sent++ % payloads.length]!);
      }
      // More due requests than free connections: open more (bounded), never wait for a reply.
      while (queue.length > idle.length + connecting && all.size < MAX_CONNECTIONS) open();
    };
    const onReady = (connection: Connection) => {
      connecting -= 1;
      idle.push(connection);
      dispatch();
    };
    const onDone = (connection: Connection, pending: Pending, status: number) => {
      record(performance.now() - pending.dueAt);
      if (status < 200 || status >= 300) non2xx += 1;
      idle.push(connection);
      dispatch();
      maybeFinish();
    };
    const onBroken = (connection: Connection, pending: Pending | undefined) => {
      all.delete(connection);
      const index = idle.indexOf(connection);
      if (index >= 0) idle.splice(index, 1);
      if (!connection.ready) connecting -= 1;
      if (pending) errors += 1;
      if (!finished) dispatch();
      maybeFinish();
    };
    const open = () => {
      connecting += 1;
      all.add(new Connection(port, onReady, onDone, onBroken));
    };
    const maybeFinish = () => {
      if (finished || (!forced && (issued < total || count + errors < total))) return;
      finished = true;
      clearInterval(ticker);
      clearTimeout(giveUp);
      for (const connection of all) connection.socket.destroy();
      const latencies = samples.subarray(0, count);
      const sum = latencies.reduce((acc, value) => acc + value, 0);
      const elapsed = (Math.max(performance.now(), end) - start) / 1000;
      resolve({
        tool: 'open-loop',
        requests: count,
        rps: round((count - non2xx) / elapsed, 0),
        p50_ms: round(percentile(latencies, 0.5), 3),
        p90_ms: round(percentile(latencies, 0.9), 3),
        p99_ms: round(percentile(latencies, 0.99), 3),
        max_ms: round(count > 0 ? latencies[count - 1]! : Number.NaN, 3),
        mean_ms: round(count > 0 ? sum / count : Number.NaN, 3),
        errors,
        non2xx,
      });
    };

    for (let index = 0; index < Math.min(request.connections, MAX_CONNECTIONS); index += 1) open();
    const ticker = setInterval(() => {
      const now = performance.now();
      if (now < start) return;
      const due = Math.min(total, Math.floor(((now - start) / 1000) * request.rate) + 1);
      while (issued < due) {
        queue.push({ dueAt: start + (issued / request.rate) * 1000 });
        issued += 1;
      }
      dispatch();
      maybeFinish();
    }, TICK_MS);
    // Replies still missing 10 s after the last request was due count as errors.
    const giveUp = setTimeout(
      () => {
        errors += Math.max(0, total - count - errors);
        forced = true;
        maybeFinish();
      },
      end - performance.now() + 10_000,
    );
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2]) {
  const request = JSON.parse(process.argv[2]) as LoadRequest & { rate: number };
  const result = await runOpenLoop(request);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}
