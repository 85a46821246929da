/**
 * The reference point for scenarios 1 and 2: the barest uWS server (one catch-all route answering
 * "Hello World!"), same binding and same Node as the service. Prints `{"port":N}` once listening.
 */
import uWS from '@trufflesuite/uws-js-unofficial';
import { listenAndReport } from './reference-server.js';

const requested = Number(process.argv[2] ?? 0);
const app = uWS.App();
app.any('/*', (response) => {
  response.writeHeader('Content-Type', 'text/plain');
  response.end('Hello World!');
});
listenAndReport(app, 'hello-uws', requested);
