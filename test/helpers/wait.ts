/** Waiting in tests for an event seen from outside (a counter, a flag, a metric), never a fixed pause. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/** Checks `condition` every `everyMs` until it holds (true) or `ms` passed (false: the caller asserts in its own words). */
export async function until(condition: () => boolean | Promise<boolean>, ms = 3000, everyMs = 10): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (await condition()) return true;
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
}

/** As `until`, failing the test if `ms` pass first. */
export async function waitFor(condition: () => boolean | Promise<boolean>, ms = 3000): Promise<void> {
  assert.ok(await until(condition, ms), 'condition not reached in time');
}
