/**
 * The reference point for scenarios 1 and 2: the barest uWS server (one catch-all route answering
 * "Hello World!"), same binding and same Node as the service. Prints `{"port":N}` once listening.
 */
import uWS from '@trufflesuite/uws-js-unofficial';

const requested = Number(process.argv[2] ?? 0);
const app = uWS.App();
app.any('/*', (response) => {
  response.writeHeader('Content-Type', 'text/plain');
  response.end('Hello World!');
});
app.listen('127.0.0.1', requested, (socket) => {
  if (!socket) {
    process.stderr.write(`hello-uws: cannot listen on ${requested}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(socket) })}\n`);
});
process.once('SIGTERM', () => process.exit(0));
process.once('SIGINT', () => process.exit(0));
