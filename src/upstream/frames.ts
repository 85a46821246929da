/**
 * The one frame loop every streaming dialect shares: upstream body bytes in, frames out, in
 * batches (all frames of one slice of a read at once), each frame bounded by
 * `upstream_max_frame_bytes`. Reads are fed to the parser in slices, so a consumer that stops
 * reading (a stalled client) holds raw bytes, not a whole read's worth of parsed frames.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { frameTooLarge } from './upstream-error.js';

/** Bytes fed to a parser at once. */
const SLICE_BYTES = 2048;

/** Decoding options for a stream of chunks (one object, not one per call). */
const STREAMING = { stream: true } as const;

/**
 * An upstream body, read and decoded one slice at a time. The read being sliced lives in this
 * object and nowhere else: an async generator that held it in a local would keep it through its
 * suspension, and an optimised generator keeps stale values of dead locals as well, so a consumer
 * that stopped reading would hold reads it finished long ago.
 */
class BodySlices {
  private readonly iterator: AsyncIterator<Uint8Array>;
  private readonly decoder = new TextDecoder('utf-8');
  private chunk: Uint8Array | undefined;
  private offset = 0;
  /** The body ended or failed, so it is not handed back by `close`. */
  private settled = false;

  constructor(body: AsyncIterable<Uint8Array>) {
    this.iterator = body[Symbol.asyncIterator]();
  }

  /** The text of the next slice of the current read; undefined once the read is used up (then `pull`). */
  nextSlice(): string | undefined {
    const chunk = this.chunk;
    if (chunk === undefined) return undefined;
    const start = this.offset;
    const end = Math.min(chunk.byteLength, start + SLICE_BYTES);
    this.offset = end;
    if (end === chunk.byteLength) this.chunk = undefined;
    return this.decoder.decode(start === 0 && end === chunk.byteLength ? chunk : chunk.subarray(start, end), STREAMING);
  }

  /** Waits for the next read of the body; false at its end. */
  async pull(): Promise<boolean> {
    let result: IteratorResult<Uint8Array>;
    try {
      result = await this.iterator.next();
    } catch (error) {
      this.settled = true;
      throw error;
    }
    if (result.done) {
      this.settled = true;
      return false;
    }
    this.chunk = result.value;
    this.offset = 0;
    return true;
  }

  /** The text the decoder still holds once the body ended. */
  rest(): string {
    return this.decoder.decode();
  }

  /** The reader stopped before the body ended: the body is handed back, as `for await` would. */
  async close(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    this.chunk = undefined;
    await this.iterator.return?.();
  }
}

/** Server-Sent Events of an upstream body, parsed by eventsource-parser, yielded as batches. */
export async function* sseFrames(
  body: AsyncIterable<Uint8Array>,
  subject: string,
  maxFrameBytes: number,
): AsyncGenerator<EventSourceMessage[]> {
  let batch: EventSourceMessage[] = [];
  let tooLarge = false;
  const parser = createParser({
    onEvent: (message) => {
      if (message.data.length > maxFrameBytes) tooLarge = true;
      else batch.push(message);
    },
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') tooLarge = true;
    },
    maxBufferSize: maxFrameBytes,
  });
  const slices = new BodySlices(body);
  try {
    for (;;) {
      const text = slices.nextSlice();
      if (text === undefined) {
        if (await slices.pull()) continue;
        break;
      }
      parser.feed(text);
      if (tooLarge) throw frameTooLarge(subject, maxFrameBytes);
      if (batch.length > 0) {
        const ready = batch;
        batch = [];
        yield ready;
      }
    }
  } finally {
    await slices.close();
  }
  parser.feed(slices.rest());
  parser.reset({ consume: true });
  if (tooLarge) throw frameTooLarge(subject, maxFrameBytes);
  if (batch.length > 0) yield batch;
}

/** Newline-delimited lines (Ollama's NDJSON) of an upstream body, non-empty and trimmed, as batches. */
export async function* ndjsonLines(body: AsyncIterable<Uint8Array>, subject: string, maxFrameBytes: number): AsyncGenerator<string[]> {
  let pending = '';
  const slices = new BodySlices(body);
  try {
    for (;;) {
      const text = slices.nextSlice();
      if (text === undefined) {
        if (await slices.pull()) continue;
        break;
      }
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      if (pending.length > maxFrameBytes) throw frameTooLarge(subject, maxFrameBytes);
      const ready = lines.map((line) => line.trim()).filter((line) => line.length > 0);
      if (ready.length > 0) yield ready;
    }
  } finally {
    await slices.close();
  }
  pending += slices.rest();
  if (pending.trim().length > 0) yield [pending.trim()];
}
