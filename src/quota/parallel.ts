/**
 * Parallel work per caller and per node, counted in this process (a node's own limits: with
 * WORKERS=N each worker counts its own). A slot is taken at admission and given back when the
 * request ends, however it ends.
 */
import type { Caller } from '../domain/types.js';

/** Gives a slot back; safe to call more than once. */
export type Release = () => void;

/** Counts requests in flight per caller against a per-caller limit. */
export class ParallelLimiter {
  private readonly running = new Map<string, number>();

  /** `limitFor` says how many requests the caller may run at once (undefined: no limit). */
  constructor(private readonly limitFor: (caller: Caller) => number | undefined) {}

  /** Takes a slot, or undefined when the caller is at its limit. */
  acquire(caller: Caller): Release | undefined {
    const limit = this.limitFor(caller);
    if (limit === undefined) return noop;
    const current = this.running.get(caller.id) ?? 0;
    if (current >= limit) return undefined;
    this.running.set(caller.id, current + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(caller.id) ?? 1) - 1;
      if (left <= 0) this.running.delete(caller.id);
      else this.running.set(caller.id, left);
    };
  }
}

/** Counts open streams on this node against one limit. */
export class StreamSlots {
  private open = 0;

  constructor(readonly limit: number) {}

  /** Takes a stream slot, or undefined when the node is full. */
  acquire(): Release | undefined {
    if (this.open >= this.limit) return undefined;
    this.open += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.open -= 1;
    };
  }
}

const noop: Release = () => undefined;
