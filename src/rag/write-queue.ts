/**
 * The queue between preparation (worker threads) and the index writer. Documents ready at the same
 * time are written together as one segment: while others are still being prepared, a write waits
 * (up to COALESCE_MS) until COALESCE_CHUNKS chunks are queued, because a segment of many documents
 * costs far fewer blocks per chunk than many small ones and leaves less to merge. A document alone
 * is written at once. One write runs at a time per process.
 */
import { ApiError } from '../errors.js';
import type { IndexBackend } from './backend.js';
import type { DocumentToWrite, IngestResult } from './ingestion.js';

/** Documents and chunks written together as one segment, at most. */
const MAX_SEGMENT_DOCUMENTS = 256;
const MAX_SEGMENT_CHUNKS = 20_000;
const COALESCE_CHUNKS = 8000;
/**
 * Longest a write waits for documents still being prepared. A batch (an upload of many files, a
 * directory) is usually prepared within it and goes in as one segment: with 200 ms a batch was cut
 * into two or three segments, each to be merged again later.
 */
const COALESCE_MS = 1000;

interface QueuedWrite {
  document: DocumentToWrite;
  resolve: (result: IngestResult) => void;
  reject: (error: unknown) => void;
}

export class WriteQueue {
  private readonly queue: QueuedWrite[] = [];
  private writing: Promise<void> | undefined;
  /** Documents being prepared that will be queued (the writer waits for them, a little). */
  private preparing = 0;
  private wake: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly writer: Pick<IndexBackend, 'write'>,
    private readonly yieldBetween: () => Promise<void>,
    /** Called after each segment is written (the merger's cue). */
    private readonly afterWrite: () => void,
  ) {}

  /** Prepares a document with `prepare` and writes it; the queue knows it is coming meanwhile. */
  async add(prepare: () => Promise<DocumentToWrite>): Promise<IngestResult> {
    if (this.closed) throw new ApiError('unavailable', 'The knowledge base is closing.');
    this.preparing += 1;
    let counted = true;
    try {
      const document = await prepare();
      this.preparing -= 1;
      counted = false;
      return await this.enqueue(document);
    } finally {
      if (counted) this.preparing -= 1;
      this.wake?.();
    }
  }

  /** Resolves when every queued document has been written. */
  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Refuses new documents and waits for the queued ones to be written. */
  async close(): Promise<void> {
    this.closed = true;
    await this.idle();
  }

  private enqueue(document: DocumentToWrite): Promise<IngestResult> {
    return new Promise<IngestResult>((resolve, reject) => {
      this.queue.push({ document, resolve, reject });
      this.wake?.();
      this.writing ??= this.drain().finally(() => {
        this.writing = undefined;
      });
    });
  }

  /** Waits while more documents are on their way and the queue is still small. */
  private async coalesce(): Promise<void> {
    const deadline = performance.now() + COALESCE_MS;
    for (;;) {
      let chunks = 0;
      for (const queued of this.queue) chunks += queued.document.content.texts.length;
      const wait = deadline - performance.now();
      if (this.preparing === 0 || chunks >= COALESCE_CHUNKS || wait <= 0 || this.closed) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      await this.coalesce();
      const collection = (this.queue[0] as QueuedWrite).document.collection;
      const batch: QueuedWrite[] = [];
      let chunks = 0;
      // One collection per segment, in queue order.
      for (let index = 0; index < this.queue.length && batch.length < MAX_SEGMENT_DOCUMENTS; ) {
        const queued = this.queue[index] as QueuedWrite;
        const size = queued.document.content.texts.length;
        if (queued.document.collection !== collection || (batch.length > 0 && chunks + size > MAX_SEGMENT_CHUNKS)) {
          index += 1;
          continue;
        }
        batch.push(queued);
        chunks += size;
        this.queue.splice(index, 1);
      }
      try {
        const results = await this.writer.write(
          batch.map((queued) => queued.document),
          this.yieldBetween,
        );
        batch.forEach((queued, index) => {
          queued.resolve(results[index] as IngestResult);
        });
      } catch (error) {
        for (const queued of batch) queued.reject(error);
      }
      this.afterWrite();
    }
  }
}
