/**
 * The ingestion worker: runs in the worker-thread pool (worker-pool.ts). `extract` turns a
 * document into text sections, `chunk` cuts them and builds the posting blocks. Both answer with
 * outcomes, never throw: an error's code would not survive the trip back to the main thread.
 */
import { extractSections, type ExtractTask, type ExtractOutcome } from './extract-sections.js';
import { packOutcome, prepareSections, type ChunkTask, type PackedPrepareOutcome } from './prepare.js';

export async function extract(task: ExtractTask): Promise<ExtractOutcome> {
  return extractSections(task);
}

export function chunk(task: ChunkTask): PackedPrepareOutcome {
  return packOutcome(prepareSections(task.sections, task.title, task));
}
