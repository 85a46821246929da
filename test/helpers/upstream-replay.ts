/**
 * Real loopback upstream servers for provider tests: they speak over node:http, replay recorded
 * wire fixtures (optionally split at random byte offsets, mid UTF-8 included), and record what
 * they were sent and when their connections closed.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

export type UpstreamHandler = (
  request: http.IncomingMessage,
  response: http.ServerResponse,
  recorded: RecordedRequest,
) => void | Promise<void>;

export interface ReplayUpstream {
  url: string;
  requests: RecordedRequest[];
  /** Resolves when the socket of the n-th request (0-based) closed; the time it closed. */
  closed(index: number): Promise<number>;
  close(): Promise<void>;
}

/** Reads a fixture under test/fixtures/providers/. */
export function fixture(name: string): string {
  return readFileSync(new URL(`../../../test/fixtures/providers/${name}`, import.meta.url), 'utf8');
}

/** A small deterministic PRNG so a split pattern can be replayed exactly. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Writes `text` as raw bytes in chunks of 1..maxChunk bytes, pausing between them so they travel apart. */
export async function writeSplit(response: http.ServerResponse, text: string, seed: number, maxChunk = 23): Promise<void> {
  const bytes = Buffer.from(text, 'utf8');
  const random = seededRandom(seed);
  let offset = 0;
  while (offset < bytes.length) {
    const size = 1 + Math.floor(random() * maxChunk);
    response.write(bytes.subarray(offset, offset + size));
    offset += size;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Starts an upstream on 127.0.0.1:0 that hands every request to `handler`. */
export async function startUpstream(handler: UpstreamHandler): Promise<ReplayUpstream> {
  const requests: RecordedRequest[] = [];
  const closings: Array<{ promise: Promise<number>; resolve: (at: number) => void }> = [];
  const closing = (index: number) => {
    while (closings.length <= index) {
      let resolve!: (at: number) => void;
      const promise = new Promise<number>((done) => (resolve = done));
      closings.push({ promise, resolve });
    }
    return closings[index]!;
  };
  const server = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const recorded: RecordedRequest = {
      method: request.method ?? '',
      url: request.url ?? '',
      headers: request.headers,
      body: text ? JSON.parse(text) : undefined,
    };
    const index = requests.push(recorded) - 1;
    response.on('close', () => closing(index).resolve(performance.now()));
    try {
      await handler(request, response, recorded);
    } catch {
      response.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    closed: (index) => closing(index).promise,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Reads a whole SSE body into [{event, data}] (data parsed as JSON). */
export function parseSse(text: string): Array<{ event: string; data: any }> {
  return (
    text
      .split('\n\n')
      // A block without a data line (a comment, `retry:`) dispatches no event.
      .filter((block) => block.trim().length > 0 && !block.startsWith(':') && /^data: /m.test(block))
      .map((block) => {
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
        const data = /^data: (.*)$/m.exec(block)?.[1] ?? 'null';
        return { event, data: JSON.parse(data) };
      })
  );
}
