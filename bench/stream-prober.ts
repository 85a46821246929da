/**
 * The probes of scenario 5 in a process of their own: short chat streams opened one at a time
 * beside the N streams the scenario holds open, timed from the request written to the first delta.
 * The process that holds the N streams reads ten thousand deltas a second; a probe timed there
 * would count that client's own turns and collections, which are not the server's latency.
 *
 * Arguments: the server's port, how many probes, the pause between them (ms), the delay before the
 * first (ms). One untimed probe first warms this process's client. Prints `{"ready":true}`, then
 * `{"ttfd":[…],"failed":n}` when the last probe finished.
 */
import { probeRequest } from './colloquy.js';
import { sleep } from './harness.js';
import { SseStream } from './sse-client.js';

const [port, count, spacingMs, delayMs] = process.argv.slice(2).map(Number);
if (!port || !count || spacingMs === undefined || delayMs === undefined) {
  throw new Error('usage: stream-prober PORT COUNT SPACING_MS DELAY_MS');
}

function probe(): SseStream {
  return new SseStream(probeRequest(port as number));
}

async function main(): Promise<void> {
  await probe().finished;
  console.log('{"ready":true}');
  await sleep(delayMs as number);
  const probes: SseStream[] = [];
  for (let index = 0; index < (count as number); index += 1) {
    if (index > 0) await sleep(spacingMs as number);
    probes.push(probe());
  }
  await Promise.all(probes.map((stream) => stream.finished));
  const timed = probes.filter((stream) => stream.firstDeltaAt > 0);
  const ttfd = timed.map((stream) => stream.firstDeltaAt - stream.startedAt);
  process.stdout.write(`${JSON.stringify({ ttfd, failed: probes.length - timed.length })}\n`, () => process.exit(0));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
