/**
 * A real loopback HTTP server standing in for a search upstream: it records every request it gets
 * (method, path, query, headers, body) and answers with whatever the test's handler returns,
 * including stalls and connection resets.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: string;
}

export type UpstreamAnswer =
  | { status: number; body: string; headers?: Record<string, string> }
  /** Never answer; the socket stays open until the client gives up. */
  | { stall: true }
  /** Destroy the connection without a response. */
  | { reset: true };

export interface SearchUpstream {
  url: string;
  requests: RecordedRequest[];
  /** How many client connections have closed so far. */
  closedConnections: number;
  close(): Promise<void>;
}

/** Reads a fixture from test/fixtures/search by name. */
export function searchFixture(name: string): string {
  return readFileSync(new URL(`../../../test/fixtures/search/${name}`, import.meta.url), 'utf8');
}

/** JSON answer with the given status. */
export function json(status: number, body: string | object): UpstreamAnswer {
  return { status, body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } };
}

/** Starts a loopback upstream on port 0. */
export async function startSearchUpstream(answer: (request: RecordedRequest) => UpstreamAnswer): Promise<SearchUpstream> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const state = { closedConnections: 0 };
  const server: Server = createServer((request, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'http://upstream.test');
      const recorded: RecordedRequest = {
        method: request.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(recorded);
      const reply = answer(recorded);
      if ('stall' in reply) return;
      if ('reset' in reply) {
        request.socket.destroy();
        return;
      }
      response.writeHead(reply.status, reply.headers ?? { 'content-type': 'text/plain' });
      response.end(reply.body);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      state.closedConnections += 1;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get closedConnections() {
      return state.closedConnections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
