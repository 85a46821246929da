/**
 * A loopback node:http server that plays an image upstream (OpenAI-compatible or Automatic1111)
 * from the recorded bodies in test/fixtures/images, and records what it was sent.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PNG } from 'pngjs';

/** Reads a file from test/fixtures/images (resolved from the repo root, not from dist). */
export function imageFixture(name: string): Buffer {
  return readFileSync(new URL(`../../../test/fixtures/images/${name}`, import.meta.url));
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

/** What the upstream does for one request: answer with a fixture or a body, or never answer. */
export type UpstreamReply =
  | { status: number; fixture: string; delayMs?: number }
  | { status: number; body: string; contentType?: string; delayMs?: number }
  | { stall: true };

export type UpstreamHandler = (request: RecordedRequest) => UpstreamReply;

export interface ImageUpstream {
  url: string;
  requests: RecordedRequest[];
  /** Handlers by `METHOD /path` (query string ignored); replace them per test. */
  handlers: Map<string, UpstreamHandler>;
  /** Requests whose connection the client closed before an answer was sent. */
  readonly cancelled: number;
  /** Requests on `METHOD /path` so far. */
  count(key: string): number;
  close(): Promise<void>;
}

/** Starts the fixture upstream on a free loopback port. */
export async function startImageUpstream(): Promise<ImageUpstream> {
  const requests: RecordedRequest[] = [];
  const handlers = new Map<string, UpstreamHandler>();
  let cancelled = 0;
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    response.on('close', () => {
      if (!response.writableFinished) cancelled += 1;
    });
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const path = (request.url ?? '/').split('?')[0]!;
      const recorded: RecordedRequest = {
        method: request.method ?? 'GET',
        path,
        headers: request.headers,
        body: text ? JSON.parse(text) : undefined,
      };
      requests.push(recorded);
      const handler = handlers.get(`${recorded.method} ${path}`);
      const reply: UpstreamReply = handler ? handler(recorded) : { status: 404, body: '{"detail":"Not Found"}' };
      if ('stall' in reply) return;
      const send = () => {
        if (response.destroyed) return;
        const body = 'fixture' in reply ? imageFixture(reply.fixture) : reply.body;
        response.writeHead(reply.status, {
          'content-type': 'contentType' in reply && reply.contentType ? reply.contentType : 'application/json',
        });
        response.end(body);
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    handlers,
    get cancelled() {
      return cancelled;
    },
    count: (key) => requests.filter((request) => `${request.method} ${request.path}` === key).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Decodes a base64 PNG completely (every pixel, every CRC) and returns its size. */
export function decodePng(b64: string): { width: number; height: number } {
  const png = PNG.sync.read(Buffer.from(b64, 'base64'));
  return { width: png.width, height: png.height };
}

/** Splits an NDJSON body into parsed lines, checking each is one complete JSON object. */
export function ndjsonLines(text: string): Array<Record<string, unknown>> {
  if (!text.endsWith('\n')) throw new Error('NDJSON body does not end with a newline');
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}
