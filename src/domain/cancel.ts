/**
 * A request's cancellation, as the service reads it: the part of AbortSignal every consumer here
 * uses (`aborted`, `reason`, `throwIfAborted` and the `abort` listeners). An AbortSignal is one, and
 * so is a RequestSignal, the small object the HTTP layer hands each request instead of an
 * AbortController: Node 20 builds an AbortSignal by changing a new EventTarget's prototype, and the
 * signal cost a gateway request about 10 µs of the main thread (docs/benchmarks.md, "Eleventh
 * step"). Code that must hand a real AbortSignal to a library gets one linked to it from
 * `abortSignalOf`.
 */

/** A listener of the `abort` event: a function, or an object with `handleEvent` (as EventTarget takes them). */
export type AbortListener = ((event: AbortEvent) => void) | { handleEvent(event: AbortEvent): void };

/** What a RequestSignal's listeners receive; AbortSignal's listeners receive an Event of the same type. */
export interface AbortEvent {
  readonly type: string;
}

export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** Throws `reason` once aborted. */
  throwIfAborted(): void;
  /** Runs `listener` once when the signal aborts (never for an abort that already happened). */
  addEventListener(type: 'abort', listener: AbortListener, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: AbortListener): void;
}

const ABORT_EVENT: AbortEvent = Object.freeze({ type: 'abort' });

/**
 * A cancellation that is aborted at most once, by its owner. Listeners run in the order they were
 * added, once each (adding one twice keeps one, and one removed during the abort by a listener
 * before it does not run, as with EventTarget); one that throws does not keep the others from
 * running, and its error is rethrown on the next tick (an uncaught exception, as from an
 * EventTarget listener).
 */
export class RequestSignal implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  /** One listener is the common case (the upstream call); more only while retries or fallbacks wait. */
  private listeners: AbortListener[] | undefined;

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  addEventListener(_type: 'abort', listener: AbortListener): void {
    if (this.aborted) return;
    if (this.listeners === undefined) this.listeners = [listener];
    else if (!this.listeners.includes(listener)) this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: AbortListener): void {
    const listeners = this.listeners;
    if (listeners === undefined) return;
    const index = listeners.indexOf(listener);
    if (index !== -1) listeners.splice(index, 1);
  }

  /** Aborts with `reason` (an AbortError when none is given) and runs the listeners; later calls do nothing. */
  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    const listeners = this.listeners;
    if (listeners === undefined) return;
    // As EventTarget does: a listener removed by one that ran before it (during this abort) does not run.
    for (const listener of listeners.slice()) {
      if (!listeners.includes(listener)) continue;
      try {
        if (typeof listener === 'function') listener.call(this, ABORT_EVENT);
        else listener.handleEvent(ABORT_EVENT);
      } catch (error) {
        process.nextTick(() => {
          throw error;
        });
      }
    }
    this.listeners = undefined;
  }
}

/** The AbortSignal linked to each signal that asked for one (made once per signal). */
const linkedSignals = new WeakMap<CancelSignal, AbortSignal>();

/** A real AbortSignal that aborts when `signal` does: `signal` itself when it is one. */
export function abortSignalOf(signal: CancelSignal): AbortSignal {
  if (signal instanceof AbortSignal) return signal;
  let linked = linkedSignals.get(signal);
  if (linked === undefined) {
    const controller = new AbortController();
    if (signal.aborted) controller.abort(signal.reason);
    else signal.addEventListener('abort', () => controller.abort(signal.reason));
    linked = controller.signal;
    linkedSignals.set(signal, linked);
  }
  return linked;
}
