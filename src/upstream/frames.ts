/**
 * The one frame loop every streaming dialect shares: upstream body bytes in, a dialect's events
 * out, in batches (everything one slice of a read produced at once), each frame bounded by
 * `upstream_max_frame_bytes`.
 *
 * One object per call does the whole read: it is the async iterator the caller reads, it slices
 * and decodes the body, frames the text (SSE or NDJSON) and hands each frame to the dialect, which
 * turns it into events synchronously. So a read of the upstream reaches the caller with one
 * promise, not one per stage, and a stream between two deltas keeps this object and its body's
 * one pending read, not a chain of suspended generators.
 *
 * Reads are fed to the framer in slices, so a consumer that stops reading (a stalled client) holds
 * raw bytes, not a whole read's worth of parsed frames.
 *
 * The object can also push its batches to a callback (`pump`): with a body that hands its reads to
 * callbacks too (the upstream client's), a read goes from the socket parser to the consumer with
 * no promise at all, and a stream between two reads keeps no pending promise.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import type { BatchTaker } from '../domain/types.js';
import { frameTooLarge } from './upstream-error.js';

export type { EventSourceMessage } from 'eventsource-parser';

/** Bytes fed to a framer at once. */
const SLICE_BYTES = 2048;

/** A byte order mark, dropped from the start of a body (as a TextDecoder does). */
const BOM = '\ufeff';

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * What one upstream dialect makes of its frames: it reads one frame at a time, synchronously, and
 * adds the events it says to `out`. Errors (a malformed frame, an error frame, a cut reply) are
 * thrown; events added before the throw still go out first.
 */
export interface Dialect<F, E> {
  /** Adds the events of one frame to `out`; true when the frame ends the reply (nothing after it is read). */
  frame(frame: F, out: E[]): boolean;
  /**
   * The reply is over: its terminal frame came (`terminal`) or the body ended without one. Adds
   * the last events to `out`, or throws when a reply that ended like this was cut short.
   */
  end(out: E[], terminal: boolean): void;
}

/** Batches read with `for await`, or pushed to a taker. */
export interface BatchStream<E> extends AsyncIterableIterator<E[]> {
  /**
   * Hands every batch to `take` as soon as it is ready. Resolves once the reply ended or `take`
   * stopped it (the body is then handed back, as `return()` would); rejects with the reply's
   * failure once the events before it were taken. Not mixed with `next()`.
   */
  pump(take: BatchTaker<E>): Promise<void>;
}

type ReadResult = IteratorResult<Uint8Array>;

/**
 * A body that can hand its next read to callbacks instead of a promise (the upstream client's):
 * the result at once when one is ready, else undefined and one of the callbacks later.
 */
export interface CallbackBody {
  pull(onRead: (result: ReadResult) => void, onError: (error: unknown) => void): ReadResult | undefined;
}

/** Text in, frames out to a sink; a frame over the bound is reported, never kept. */
interface Framer {
  feed(text: string): void;
  /** The body ended: frames the framer still holds. */
  end(): void;
  readonly tooLarge: boolean;
}

/** Server-Sent Events, parsed by eventsource-parser. */
class SseFramer implements Framer {
  tooLarge = false;
  private readonly parser: EventSourceParser;

  constructor(sink: (frame: EventSourceMessage) => void, maxFrameBytes: number) {
    this.parser = createParser({
      onEvent: (message) => {
        if (message.data.length > maxFrameBytes) this.tooLarge = true;
        else if (!this.tooLarge) sink(message);
      },
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') this.tooLarge = true;
      },
      maxBufferSize: maxFrameBytes,
    });
  }

  feed(text: string): void {
    this.parser.feed(text);
  }

  end(): void {
    this.parser.reset({ consume: true });
  }
}

/** Newline-delimited lines (Ollama's NDJSON), non-empty and trimmed. */
class NdjsonFramer implements Framer {
  tooLarge = false;
  private pending = '';

  constructor(
    private readonly sink: (line: string) => void,
    private readonly maxFrameBytes: number,
  ) {}

  feed(text: string): void {
    const buffered = this.pending + text;
    let start = 0;
    for (let newline = buffered.indexOf('\n'); newline !== -1; newline = buffered.indexOf('\n', start)) {
      const line = buffered.slice(start, newline).trim();
      start = newline + 1;
      if (line.length > 0) this.sink(line);
    }
    this.pending = start === 0 ? buffered : buffered.slice(start);
    if (this.pending.length > this.maxFrameBytes) this.tooLarge = true;
  }

  end(): void {
    const line = this.pending.trim();
    this.pending = '';
    if (line.length > 0) this.sink(line);
  }
}

/**
 * One upstream reply read through a dialect. The read being sliced lives in this object and
 * nowhere else, so a consumer that stopped reading holds that read's unparsed rest and nothing it
 * finished with. `next` is called one at a time (as `for await` does).
 */
class FrameReader<F, E> implements BatchStream<E> {
  /**
   * UTF-8 across reads (a character split between two reads is held back until its rest comes;
   * invalid bytes become U+FFFD). Node's StringDecoder, not a TextDecoder: each TextDecoder builds
   * an ICU converter at its first decode, which cost as much per reply as the decoding itself. Made
   * only when a slice ends inside a character: until then every slice ended on a whole one (an
   * ASCII byte last) and decodes on its own, as the decoder would, without the decoder's buffer.
   */
  private decoder: StringDecoder | undefined;
  /** No text was decoded yet: a leading byte order mark is still to be dropped. */
  private atStart = true;
  private readonly framer: Framer;
  /** The read being sliced, and where its next slice starts. */
  private chunk: Uint8Array | undefined;
  private offset = 0;
  /** Events produced and not yet handed out. */
  private out: E[] = [];
  /** Why the reply failed; thrown once the events before it went out. */
  private failure: unknown;
  /** The dialect saw the reply's terminal frame: nothing after it is read. */
  private terminal = false;
  /** The body ended or failed, so it is not handed back. */
  private bodyDone = false;
  /** The decoder's and framer's rest was framed after the body ended. */
  private flushed = false;
  /** The dialect's last events were made: the next read after them is the end. */
  private ended = false;
  private closed = false;
  /** A read of the body arrived: its events, or (when it completed no frame) the wait for the next read. */
  private readonly onRead = (result: ReadResult): Promise<IteratorResult<E[]>> | IteratorResult<E[]> => {
    if (this.closed) return DONE;
    this.received(result);
    return this.fill() ?? this.body.next().then(this.onRead, this.onBodyFailed);
  };
  private readonly onBodyFailed = (error: unknown): never => {
    this.bodyBroke();
    throw error;
  };
  /** The consumer of pump() and how the pump ends; set while one runs. */
  private taker: BatchTaker<E> | undefined;
  private pumpEnded: (() => void) | undefined;
  private pumpFailed: ((error: unknown) => void) | undefined;

  constructor(
    private readonly body: AsyncIterator<Uint8Array> & Partial<CallbackBody>,
    private readonly dialect: Dialect<F, E>,
    framer: (sink: (frame: F) => void) => Framer,
    private readonly subject: string,
    private readonly maxFrameBytes: number,
  ) {
    this.framer = framer((frame) => this.frame(frame));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<E[]>> {
    let result: IteratorResult<E[]> | undefined;
    try {
      result = this.fill();
    } catch (error) {
      return Promise.reject(error);
    }
    if (result !== undefined) return Promise.resolve(result);
    // Nothing is buffered: wait for the next read of the body.
    return this.body.next().then(this.onRead, this.onBodyFailed);
  }

  pump(take: BatchTaker<E>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.taker = take;
      this.pumpEnded = resolve;
      this.pumpFailed = reject;
      this.step();
    });
  }

  /** Hands batches to the pump's taker until it must wait: for the body's next read, or for the taker. */
  private readonly step = (): void => {
    const take = this.taker;
    if (take === undefined) return;
    try {
      for (;;) {
        const result = this.fill();
        if (result === undefined) {
          // Nothing is buffered: the body's next read, at once when it has one ready.
          if (!this.pullBody()) return;
          continue;
        }
        if (result.done) {
          this.endPump();
          return;
        }
        const taken = take(result.value);
        if (taken === true) continue;
        if (taken === false) {
          this.onTaken(false);
          return;
        }
        taken.then(this.onTaken, this.failPump);
        return;
      }
    } catch (error) {
      this.failPump(error);
    }
  };

  /** The taker answered: go on, or stop reading (the body is handed back). */
  private readonly onTaken = (more: boolean): void => {
    if (more) {
      this.step();
      return;
    }
    this.close();
    this.endPump();
  };

  /** The reply failed (or the taker threw): the body is handed back unless it failed itself, and the pump rejects. */
  private readonly failPump = (error: unknown): void => {
    const fail = this.pumpFailed;
    this.taker = undefined;
    this.pumpEnded = undefined;
    this.pumpFailed = undefined;
    this.close();
    fail?.(error);
  };

  /** The reply ended, or the taker stopped it: the pump resolves. */
  private endPump(): void {
    const end = this.pumpEnded;
    this.taker = undefined;
    this.pumpEnded = undefined;
    this.pumpFailed = undefined;
    end?.();
  }

  /** Asks the body for its next read: true when one was ready at once (taken in), false when a callback will bring it. */
  private pullBody(): boolean {
    const body = this.body;
    if (body.pull === undefined) {
      body.next().then(this.onPulled, this.onPullFailed);
      return false;
    }
    let result: ReadResult | undefined;
    try {
      result = body.pull(this.onPulled, this.onPullFailed);
    } catch (error) {
      this.bodyBroke();
      throw error;
    }
    if (result === undefined) return false;
    this.received(result);
    return true;
  }

  private readonly onPulled = (result: ReadResult): void => {
    if (!this.closed) this.received(result);
    this.step();
  };

  private readonly onPullFailed = (error: unknown): void => {
    this.bodyBroke();
    this.failPump(error);
  };

  /** A read of the body: the chunk to slice, or the body's end. */
  private received(result: ReadResult): void {
    if (result.done) this.bodyDone = true;
    else {
      this.chunk = result.value;
      this.offset = 0;
    }
  }

  /** The body failed: it is done, and nothing more is read. */
  private bodyBroke(): void {
    this.bodyDone = true;
    this.closed = true;
    this.chunk = undefined;
  }

  /** The caller stopped reading: the body is handed back, as `for await` would (the socket may be kept). */
  return(): Promise<IteratorResult<E[]>> {
    this.close();
    return Promise.resolve(DONE);
  }

  /** One frame from the framer: to the dialect, unless the reply already ended or failed. */
  private frame(frame: F): void {
    if (this.terminal || this.failure !== undefined) return;
    try {
      this.terminal = this.dialect.frame(frame, this.out);
    } catch (error) {
      this.failure = error;
    }
  }

  /** Frames what is buffered until events are ready; undefined when the body must be read first. Throws the reply's failure. */
  private fill(): IteratorResult<E[]> | undefined {
    if (this.closed) return DONE;
    while (this.failure === undefined && !this.terminal && !this.flushed) {
      const text = this.nextSlice();
      if (text === undefined) {
        if (!this.bodyDone) return undefined;
        if (this.decoder !== undefined) this.framer.feed(this.decoder.end());
        this.framer.end();
        this.flushed = true;
      } else this.framer.feed(text);
      if (this.framer.tooLarge && this.failure === undefined) this.failure = frameTooLarge(this.subject, this.maxFrameBytes);
      if (this.out.length > 0 && this.failure === undefined && !this.terminal) return this.take();
    }
    if (this.failure === undefined && !this.ended) {
      // The terminal frame came or the body ended: the dialect's last events (or why it was cut).
      this.ended = true;
      this.releaseBody();
      try {
        this.dialect.end(this.out, this.terminal);
      } catch (error) {
        this.failure = error;
      }
    }
    // Events before a failure still go out before it.
    if (this.out.length > 0) return this.take();
    this.close();
    if (this.failure !== undefined) throw this.failure;
    return DONE;
  }

  private take(): IteratorResult<E[]> {
    const batch = this.out;
    this.out = [];
    return { value: batch, done: false };
  }

  /** The text of the next slice of the current read; undefined once the read is used up. */
  private nextSlice(): string | undefined {
    const chunk = this.chunk;
    if (chunk === undefined) return undefined;
    const start = this.offset;
    const end = Math.min(chunk.byteLength, start + SLICE_BYTES);
    this.offset = end;
    if (end === chunk.byteLength) this.chunk = undefined;
    const text = this.decode(start === 0 && end === chunk.byteLength ? chunk : chunk.subarray(start, end));
    if (this.atStart && text.length > 0) {
      this.atStart = false;
      if (text.startsWith(BOM)) return text.slice(1);
    }
    return text;
  }

  /** The text of a slice: decoded on its own while no character was split, else through the decoder. */
  private decode(bytes: Uint8Array): string {
    if (this.decoder === undefined) {
      const length = bytes.byteLength;
      if (length === 0) return '';
      if ((bytes[length - 1] as number) < 0x80)
        return (bytes instanceof Buffer ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, length)).toString('utf8');
      this.decoder = new StringDecoder('utf8');
    }
    return this.decoder.write(bytes);
  }

  /** Done with the reply: nothing more is handed out, and the body is released. */
  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.out = [];
    this.releaseBody();
  }

  /** A body that has not ended is handed back, as `for await` would (its socket is kept if the reply can finish on its own). */
  private releaseBody(): void {
    this.chunk = undefined;
    if (this.bodyDone) return;
    this.bodyDone = true;
    this.body.return?.().catch(() => undefined);
  }
}

/** The events of an upstream body of Server-Sent Events, read through `dialect`, as batches. */
export function readSse<E>(
  body: AsyncIterator<Uint8Array> & Partial<CallbackBody>,
  dialect: Dialect<EventSourceMessage, E>,
  subject: string,
  maxFrameBytes: number,
): BatchStream<E> {
  return new FrameReader(body, dialect, (sink) => new SseFramer(sink, maxFrameBytes), subject, maxFrameBytes);
}

/** The events of an upstream body of newline-delimited JSON (non-empty, trimmed lines), read through `dialect`, as batches. */
export function readNdjson<E>(
  body: AsyncIterator<Uint8Array> & Partial<CallbackBody>,
  dialect: Dialect<string, E>,
  subject: string,
  maxFrameBytes: number,
): BatchStream<E> {
  return new FrameReader(body, dialect, (sink) => new NdjsonFramer(sink, maxFrameBytes), subject, maxFrameBytes);
}
