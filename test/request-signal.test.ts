/**
 * A request's cancellation signal behaves as an AbortSignal does for everything the service reads:
 * listeners run once, in order, only for an abort still to come; a removed or repeated listener is
 * handled as EventTarget handles it; the reason is kept and thrown; and a library that needs a real
 * AbortSignal gets one that aborts with it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { abortSignalOf, RequestSignal, type AbortListener } from '../src/domain/cancel.js';

describe('RequestSignal', () => {
  test('runs each listener once, in the order added, with the reason already set', () => {
    const signal = new RequestSignal();
    const seen: string[] = [];
    const reason = new Error('client gone');
    signal.addEventListener('abort', () => seen.push(`function ${signal.reason === reason}`));
    signal.addEventListener('abort', { handleEvent: (event) => seen.push(`object ${event.type}`) });
    assert.equal(signal.aborted, false);
    signal.abort(reason);
    signal.abort(new Error('second'));
    assert.deepEqual(seen, ['function true', 'object abort']);
    assert.equal(signal.aborted, true);
    assert.equal(signal.reason, reason);
    assert.throws(
      () => signal.throwIfAborted(),
      (error) => error === reason,
    );
  });

  test('keeps one copy of a listener added twice and skips one removed before the abort', () => {
    const signal = new RequestSignal();
    let twice = 0;
    let removed = 0;
    const once: AbortListener = () => twice++;
    const gone: AbortListener = () => removed++;
    signal.addEventListener('abort', once);
    signal.addEventListener('abort', once);
    signal.addEventListener('abort', gone);
    signal.removeEventListener('abort', gone);
    signal.removeEventListener('abort', () => undefined);
    signal.abort('stop');
    assert.equal(twice, 1);
    assert.equal(removed, 0);
  });

  test('skips a listener that one before it removed during the abort, as an AbortSignal does', () => {
    for (const signal of [new RequestSignal(), new AbortController()]) {
      const target = signal instanceof RequestSignal ? signal : signal.signal;
      const seen: string[] = [];
      const second: AbortListener = () => seen.push('second');
      target.addEventListener('abort', () => {
        seen.push('first');
        target.removeEventListener('abort', second);
      });
      target.addEventListener('abort', second);
      target.addEventListener('abort', () => seen.push('third'));
      signal.abort('stop');
      assert.deepEqual(seen, ['first', 'third'], signal.constructor.name);
    }
  });

  test('never runs a listener added after the abort, as an AbortSignal does not', () => {
    const signal = new RequestSignal();
    signal.abort('stop');
    let ran = false;
    signal.addEventListener('abort', () => {
      ran = true;
    });
    const controller = new AbortController();
    controller.abort('stop');
    controller.signal.addEventListener('abort', () => {
      ran = true;
    });
    assert.equal(ran, false);
  });

  test('aborts with an AbortError when no reason is given, like AbortController.abort()', () => {
    const signal = new RequestSignal();
    signal.throwIfAborted();
    signal.abort();
    assert.ok(signal.reason instanceof DOMException);
    assert.equal((signal.reason as DOMException).name, 'AbortError');
  });

  test('gives libraries a real AbortSignal that aborts with it, made once', async () => {
    const signal = new RequestSignal();
    const real = abortSignalOf(signal);
    assert.ok(real instanceof AbortSignal);
    assert.equal(abortSignalOf(signal), real);
    const waiting = sleep(10_000, undefined, { signal: real });
    signal.abort(new Error('client gone'));
    await assert.rejects(waiting, (error: Error) => error.name === 'AbortError');
    assert.equal(real.aborted, true);
    assert.equal((real.reason as Error).message, 'client gone');

    const late = new RequestSignal();
    late.abort('already');
    assert.equal(abortSignalOf(late).reason, 'already');
    const controller = new AbortController();
    assert.equal(abortSignalOf(controller.signal), controller.signal);
  });
});
