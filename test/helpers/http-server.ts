/** A bare HttpServer (no services) on 127.0.0.1:0, for tests of the HTTP layer itself. */
import { HttpServer, type HttpServerOptions } from '../../src/http/server.js';
import type { Route } from '../../src/http/types.js';

/** Builds and starts an HttpServer with small limits and no-op hooks; `overrides` replaces any option. */
export async function startHttpServer(
  routes: Route[],
  overrides: Partial<HttpServerOptions> = {},
): Promise<{ server: HttpServer; port: number }> {
  const server = new HttpServer({
    routes,
    limits: { maxBytes: 1024, maxDepth: 8 },
    trustProxy: { kind: 'none' },
    onRequestDone: () => {},
    onBackpressure: () => {},
    onInternalError: () => {},
    ...overrides,
  });
  const port = await server.listen('127.0.0.1', 0);
  return { server, port };
}
