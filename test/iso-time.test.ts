/**
 * The cheap timestamps the chat path writes are character for character what toISOString writes,
 * for any time a Date can hold: within one second and across seconds, before 1970, with fractions
 * of a millisecond, in the extended years, and for invalid times (which throw alike).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { isoTime } from '../src/domain/iso-time.js';

const MAX_TIME = 8.64e15;

describe('isoTime', () => {
  test('writes what toISOString writes for any time a Date holds', () => {
    fc.assert(
      fc.property(fc.double({ min: -MAX_TIME, max: MAX_TIME, noNaN: true }), (ms) => {
        assert.equal(isoTime(ms), new Date(ms).toISOString());
      }),
      { numRuns: 5000 },
    );
  });

  test('writes what toISOString writes for times close together, now, and around the epoch', () => {
    const now = Date.now();
    for (const ms of [
      now,
      now + 1,
      now + 999,
      now + 1000,
      now - 1,
      0,
      -1,
      -999,
      -1000,
      -1001,
      999.9,
      -0.5,
      253402300799999,
      253402300800000,
    ]) {
      assert.equal(isoTime(ms), new Date(ms).toISOString(), `at ${ms}`);
      assert.equal(isoTime(ms), new Date(ms).toISOString(), `again at ${ms}`);
    }
    assert.match(isoTime(), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  test('throws as toISOString does for a time a Date cannot hold', () => {
    for (const ms of [Number.NaN, Number.POSITIVE_INFINITY, MAX_TIME + 1]) {
      assert.throws(() => new Date(ms).toISOString(), RangeError);
      assert.throws(() => isoTime(ms), RangeError);
    }
  });
});
