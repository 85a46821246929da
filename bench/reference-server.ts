/**
 * What the reference servers (hello-uws.ts, bare-proxy.ts) share around their one route: listening
 * on loopback, printing `{"port":N}` for the bench to read, and leaving at once on a signal.
 */
import uWS, { type TemplatedApp } from '@trufflesuite/uws-js-unofficial';

/** Listens on 127.0.0.1:`port` (0: any free port) and prints the port, or exits with a message. */
export function listenAndReport(app: TemplatedApp, name: string, port: number): void {
  app.listen('127.0.0.1', port, (socket) => {
    if (!socket) {
      process.stderr.write(`${name}: cannot listen on ${port}\n`);
      process.exit(1);
    }
    process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(socket) })}\n`);
  });
  process.once('SIGTERM', () => process.exit(0));
  process.once('SIGINT', () => process.exit(0));
}
