/**
 * The one frame loop every streaming dialect shares: upstream body bytes in, frames out, in
 * batches (all frames of one slice of a read at once), each frame bounded by
 * `upstream_max_frame_bytes`. Reads are fed to the parser in slices, so a consumer that stops
 * reading (a stalled client) holds raw bytes, not a whole read's worth of parsed frames.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { frameTooLarge } from './upstream-error.js';

/** Bytes fed to a parser at once. */
const SLICE_BYTES = 4096;

/** Decoding options for a stream of chunks (one object, not one per call). */
const STREAMING = { stream: true } as const;

/** Server-Sent Events of an upstream body, parsed by eventsource-parser, yielded as batches. */
export async function* sseFrames(
  body: AsyncIterable<Uint8Array>,
  subject: string,
  maxFrameBytes: number,
): AsyncGenerator<EventSourceMessage[]> {
  const decoder = new TextDecoder('utf-8');
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
  for await (const chunk of body) {
    for (let offset = 0; offset < chunk.byteLength; offset += SLICE_BYTES) {
      const slice = chunk.byteLength <= SLICE_BYTES ? chunk : chunk.subarray(offset, offset + SLICE_BYTES);
      parser.feed(decoder.decode(slice, STREAMING));
      if (tooLarge) throw frameTooLarge(subject, maxFrameBytes);
      if (batch.length > 0) {
        const ready = batch;
        batch = [];
        yield ready;
      }
    }
  }
  parser.feed(decoder.decode());
  parser.reset({ consume: true });
  if (tooLarge) throw frameTooLarge(subject, maxFrameBytes);
  if (batch.length > 0) yield batch;
}

/** Newline-delimited lines (Ollama's NDJSON) of an upstream body, non-empty and trimmed, as batches. */
export async function* ndjsonLines(body: AsyncIterable<Uint8Array>, subject: string, maxFrameBytes: number): AsyncGenerator<string[]> {
  const decoder = new TextDecoder('utf-8');
  let pending = '';
  for await (const chunk of body) {
    for (let offset = 0; offset < chunk.byteLength; offset += SLICE_BYTES) {
      const slice = chunk.byteLength <= SLICE_BYTES ? chunk : chunk.subarray(offset, offset + SLICE_BYTES);
      pending += decoder.decode(slice, STREAMING);
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      if (pending.length > maxFrameBytes) throw frameTooLarge(subject, maxFrameBytes);
      const ready = lines.map((line) => line.trim()).filter((line) => line.length > 0);
      if (ready.length > 0) yield ready;
    }
  }
  pending += decoder.decode();
  if (pending.trim().length > 0) yield [pending.trim()];
}
