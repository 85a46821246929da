/** Waiting that a request's abort cuts short, shared by the upstream retry backoff and the builtin pacing. */
import { ClientGone } from '../errors.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Why a request's work stopped: the signal's own reason, else a client disconnect. */
export function abortReason(signal: CancelSignal): unknown {
  return signal.reason ?? new ClientGone();
}

/** Resolves after `ms`, or rejects with the abort reason as soon as `signal` aborts (at once if it already has). */
export function abortableSleep(ms: number, signal: CancelSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(abortReason(signal));
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
