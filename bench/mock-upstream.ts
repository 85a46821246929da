/**
 * A loopback OpenAI-compatible upstream for the benchmarks: `POST /v1/chat/completions` answers
 * with a `chat.completion` JSON body or, with `stream: true`, paced `chat.completion.chunk` SSE
 * frames ending in `data: [DONE]`, exactly as the real API frames them. `GET /v1/models` lists one
 * model; `GET /_stats` reports open and closed-early streams.
 *
 * Pacing comes from the command line and can be overridden per request by a directive inside the
 * last user message, e.g. `[mock chunks=40 interval_ms=250 size=8 burst=1 tag=a1]`, because the message is
 * the one thing every gateway forwards unchanged.
 *
 * Run as a child (`node dist/bench/mock-upstream.js --port 0 --chunks 8 --interval-ms 0`): it prints
 * `{"port":N}` once listening. Scenarios that need exact timing import startMock() instead.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';

export interface MockOptions {
  port: number;
  /** Content chunks per streamed reply. */
  chunks: number;
  /** Pause between content chunks (0: all at once). */
  intervalMs: number;
  /** Characters per content chunk. */
  size: number;
  /** When false the mock stops writing to a stream whose socket buffer is over 4 MiB (to bound its own memory). */
  unbounded: boolean;
}

export interface MockStats {
  requests: number;
  /** Chat requests that asked for SSE, and those that asked for one JSON body. */
  stream_requests: number;
  json_requests: number;
  streams_open: number;
  streams_completed: number;
  /** Streams whose connection closed before the mock finished sending. */
  streams_closed_early: number;
  /** Bytes the mock handed to sockets that the peer had not yet taken (summed over open streams). */
  bytes_pending: number;
  /** Bytes of open streams that left the mock's process (into kernel buffers or the peer), summed. */
  bytes_flushed: number;
}

export interface MockUpstream {
  port: number;
  server: Server;
  stats(): MockStats;
  /** Emits `closed` (tag, performance.now()) when a stream's connection closes before it finished, `request` (tag) on arrival. */
  events: EventEmitter;
  close(): Promise<void>;
}

const DIRECTIVE = /\[mock([^\]]*)\]/;
const MAX_PENDING_BYTES = 4 * 1024 * 1024;
const PROSE = 'The quick brown fox jumps over the lazy dog while streamed tokens arrive at a steady pace. ';

interface Directive {
  chunks: number;
  intervalMs: number;
  size: number;
  /** Frames sent back to back at each tick (a fast upstream with realistically small frames). */
  burst: number;
  tag: string | undefined;
}

function directiveFrom(body: { messages?: Array<{ role?: string; content?: unknown }> }, defaults: MockOptions): Directive {
  const directive: Directive = { chunks: defaults.chunks, intervalMs: defaults.intervalMs, size: defaults.size, burst: 1, tag: undefined };
  const messages = Array.isArray(body.messages) ? body.messages : [];
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const content = messages[index]?.content;
    if (typeof content !== 'string') continue;
    const match = DIRECTIVE.exec(content);
    if (!match) continue;
    for (const pair of match[1]!.trim().split(/\s+/)) {
      const [key, value] = pair.split('=');
      if (!key || value === undefined) continue;
      if (key === 'tag') directive.tag = value;
      else if (key === 'chunks') directive.chunks = Math.max(1, Number(value));
      else if (key === 'interval_ms') directive.intervalMs = Math.max(0, Number(value));
      else if (key === 'size') directive.size = Math.max(1, Number(value));
      else if (key === 'burst') directive.burst = Math.max(1, Number(value));
    }
    break;
  }
  return directive;
}

/** The `index`-th piece of `size` characters of an endless repetition of PROSE. */
function textOfSize(size: number, index: number): string {
  const start = (index * size) % PROSE.length;
  let text = PROSE.slice(start, start + size);
  while (text.length < size) text += PROSE.slice(0, size - text.length);
  return text;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    request.on('error', reject);
  });
}

/** Starts the mock on 127.0.0.1. */
export function startMock(options: MockOptions): Promise<MockUpstream> {
  const events = new EventEmitter();
  const open = new Set<ServerResponse>();
  const counters = { requests: 0, streamRequests: 0, jsonRequests: 0, completed: 0, closedEarly: 0 };
  let sequence = 0;

  const chunkFrame = (id: string, model: string, created: number, delta: Record<string, unknown>, finish: string | null) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    counters.requests += 1;
    if (request.method === 'GET' && request.url === '/_stats') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(stats()));
      return;
    }
    if (request.method === 'GET' && request.url?.startsWith('/v1/models')) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ object: 'list', data: [{ id: 'mock-gpt', object: 'model', created: 0, owned_by: 'bench' }] }));
      return;
    }
    if (request.method !== 'POST' || !request.url?.startsWith('/v1/chat/completions')) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
      return;
    }
    let body: {
      model?: string;
      stream?: boolean;
      stream_options?: { include_usage?: boolean };
      messages?: Array<{ role?: string; content?: unknown }>;
    };
    try {
      body = JSON.parse(await readBody(request)) as typeof body;
    } catch {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: 'invalid JSON', type: 'invalid_request_error' } }));
      return;
    }
    const directive = directiveFrom(body, options);
    const id = `chatcmpl-bench${++sequence}`;
    const model = body.model ?? 'mock-gpt';
    const created = Math.floor(Date.now() / 1000);
    events.emit('request', directive.tag);
    if (body.stream) counters.streamRequests += 1;
    else counters.jsonRequests += 1;
    if (!body.stream) {
      let content = '';
      for (let index = 0; index < directive.chunks; index += 1) content += textOfSize(directive.size, index);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 12, completion_tokens: directive.chunks, total_tokens: 12 + directive.chunks },
        }),
      );
      counters.completed += 1;
      return;
    }

    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    open.add(response);
    let finished = false;
    let timer: NodeJS.Timeout | undefined;
    response.on('close', () => {
      open.delete(response);
      if (timer) clearTimeout(timer);
      if (!finished) {
        counters.closedEarly += 1;
        events.emit('closed', directive.tag, performance.now());
      }
    });
    // The upstream "keeps sending" whatever the reader does, but bounds its own buffer: a frame
    // that would go over it is dropped before it is even built (the mock's CPU is the load core's).
    const full = () => !options.unbounded && response.writableLength > MAX_PENDING_BYTES;
    const send = (frame: string) => {
      response.write(frame);
    };
    send(chunkFrame(id, model, created, { role: 'assistant', content: '' }, null));
    let sent = 0;
    const next = () => {
      timer = undefined;
      if (response.destroyed) return;
      // With no pacing, everything goes out in one synchronous burst.
      let inTick = 0;
      do {
        if (!full()) send(chunkFrame(id, model, created, { content: textOfSize(directive.size, sent) }, null));
        sent += 1;
        inTick += 1;
      } while ((directive.intervalMs === 0 || inTick < directive.burst) && sent < directive.chunks);
      if (sent < directive.chunks) {
        timer = setTimeout(next, directive.intervalMs);
        return;
      }
      send(chunkFrame(id, model, created, {}, 'stop'));
      if (body.stream_options?.include_usage) {
        send(
          `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: { prompt_tokens: 12, completion_tokens: directive.chunks, total_tokens: 12 + directive.chunks } })}\n\n`,
        );
      }
      send('data: [DONE]\n\n');
      finished = true;
      counters.completed += 1;
      open.delete(response);
      response.end();
    };
    next();
  };

  const stats = (): MockStats => {
    let pending = 0;
    let flushed = 0;
    for (const response of open) {
      pending += response.writableLength;
      // socket.bytesWritten counts queued bytes too; what is still queued has not left the process.
      const socket = response.socket;
      if (socket) flushed += socket.bytesWritten - socket.writableLength;
    }
    return {
      requests: counters.requests,
      stream_requests: counters.streamRequests,
      json_requests: counters.jsonRequests,
      streams_open: open.size,
      streams_completed: counters.completed,
      streams_closed_early: counters.closedEarly,
      bytes_pending: pending,
      bytes_flushed: flushed,
    };
  };

  const server = createServer({ keepAliveTimeout: 60_000 }, (request, response) => {
    handle(request, response).catch(() => response.destroy());
  });
  // Thousands of concurrent streams: no per-server connection cap, generous backlog.
  server.maxConnections = Infinity;
  server.headersTimeout = 60_000;
  server.requestTimeout = 0;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port, host: '127.0.0.1', backlog: 4096 }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : options.port;
      resolve({
        port,
        server,
        stats,
        events,
        close: () =>
          new Promise<void>((done) => {
            for (const response of open) response.destroy();
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function argValue(args: string[], name: string, fallback: number): number {
  const index = args.indexOf(name);
  return index >= 0 && args[index + 1] !== undefined ? Number(args[index + 1]) : fallback;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const mock = await startMock({
    port: argValue(args, '--port', 0),
    chunks: argValue(args, '--chunks', 8),
    intervalMs: argValue(args, '--interval-ms', 0),
    size: argValue(args, '--size', 6),
    unbounded: args.includes('--unbounded'),
  });
  process.stdout.write(`${JSON.stringify({ port: mock.port })}\n`);
  const stop = () => void mock.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
