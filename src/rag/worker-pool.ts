/**
 * The pool of worker threads that extracts, chunks and tokenises documents (piscina), so the
 * event loop keeps answering chat and /health while documents go in. With zero threads the same
 * work runs in-process (the command line's small jobs, and measurements of the difference).
 */
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { extractSections, type ExtractOutcome, type ExtractTask } from './extract-sections.js';
import { prepareSections, unpackOutcome, type ChunkTask, type PackedPrepareOutcome, type PrepareOutcome } from './prepare.js';
import type { CancelSignal } from '../domain/cancel.js';

export interface Preparer {
  extract(task: ExtractTask, signal?: CancelSignal): Promise<ExtractOutcome>;
  chunk(task: ChunkTask, signal?: CancelSignal): Promise<PrepareOutcome>;
  close(): Promise<void>;
}

/** Threads when none are configured: one per core but one, at most four. */
export function defaultIngestThreads(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

/** A preparer on `threads` worker threads, or in-process when `threads` is 0. */
export function createPreparer(threads: number): Preparer {
  if (threads === 0) {
    return {
      extract: async (task) => extractSections(task),
      chunk: async (task) => prepareSections(task.sections, task.title, task),
      close: async () => {},
    };
  }
  const pool = new Piscina({
    // A CommonJS entry that imports the worker's module (see there why).
    filename: new URL('./ingest-worker-entry.cjs', import.meta.url).href,
    // One thread is kept ready (about 8 MB): a thread started by the first document of a burst
    // boots at full priority (its nice value applies once it runs) beside the event loop that is
    // receiving the burst, and the idle timeout below would make every burst after a quiet spell
    // such a first one. Threads beyond it stop when idle.
    minThreads: 1,
    maxThreads: threads,
    idleTimeout: 30_000,
    // Background work: on a busy core the event loop (chat, /health) gets the CPU first.
    niceIncrement: 10,
  });
  return {
    extract: (task, signal) => pool.run(task, { name: 'extract', signal }) as Promise<ExtractOutcome>,
    chunk: async (task, signal) => unpackOutcome((await pool.run(task, { name: 'chunk', signal })) as PackedPrepareOutcome),
    close: () => pool.destroy(),
  };
}
