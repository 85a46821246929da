/**
 * The entry piscina loads in each worker thread: a CommonJS file that imports the ingestion
 * worker (ingest-worker.ts) with import(). piscina loads a task file with require() first; on Node
 * 20 require() of an ES module that is stopped mid-way (the pool closed while its thread is still
 * starting) trips a fatal V8 check that aborts the whole process, while an import() is stopped
 * cleanly. The import starts as the thread starts, so a ready thread has its code loaded.
 */
import type * as Worker from './ingest-worker.js';

const loaded: Promise<typeof Worker> = import('./ingest-worker.js');
// A failed load is reported to the tasks that await it, not as an unhandled rejection.
loaded.catch(() => {});

export = {
  extract: async (task: Parameters<typeof Worker.extract>[0]) => (await loaded).extract(task),
  chunk: async (task: Parameters<typeof Worker.chunk>[0]) => (await loaded).chunk(task),
};
