/**
 * Sharing the event loop with everyone else. An upstream that sends faster than it is consumed
 * (an endless answer collected into a JSON reply) is read from buffers without ever waiting for
 * I/O, so the chain of async generators runs on microtasks alone and the loop does not turn:
 * every other request waits. `loopBusyFor` tells when the current run has gone on too long; the
 * caller then awaits `nextTurn`.
 */

/** When the current uninterrupted run was first seen (a marker is armed until the loop turns). */
let runStart = 0;
let armed = false;
const onTurn = () => {
  armed = false;
};

/** True when code has run for more than `ms` since the event loop last turned (as far as this module saw). */
export function loopBusyFor(ms: number): boolean {
  const now = performance.now();
  if (!armed) {
    armed = true;
    runStart = now;
    setImmediate(onTurn);
    return false;
  }
  return now - runStart > ms;
}

/** Resolves after the event loop has turned once (timers and I/O of others ran). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
