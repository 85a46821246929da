/**
 * Request bodies: collected from the moment the request arrives (uWS wants onData attached
 * synchronously), bounded by a byte limit counted while reading, then checked as strict UTF-8 JSON
 * with a nesting cap before JSON.parse ever sees it.
 */
import { ApiError } from '../errors.js';

export interface BodyLimits {
  maxBytes: number;
  maxDepth: number;
}

/** Largest declared body given its whole buffer before its bytes arrive. */
const PREALLOCATED_BYTES = 1024 * 1024;

type BodyState = { kind: 'reading' } | { kind: 'complete'; body: Buffer } | { kind: 'failed'; error: ApiError };

/** Accumulates one request body; the handler awaits it only when it needs it. */
export class BodyCollector {
  private chunks: Buffer[] = [];
  private received = 0;
  private waiters: Array<() => void> = [];
  /** The whole body's buffer when its length was declared: chunks are copied into it as they come. */
  private whole: Buffer | undefined;
  /** True once pieces() took the body over: it is handed out as it arrives, never joined. */
  private streamed = false;
  /** What pieces() handed out: bytes of `whole`, or entries of `chunks` once collected chunk by chunk. */
  private delivered = 0;
  /** Wakes pieces() when bytes arrived or the body ended. */
  private progress: (() => void) | undefined;

  constructor(
    private readonly maxBytes: number,
    private state: BodyState = { kind: 'reading' },
    declaredLength?: number,
  ) {
    // Only small bodies get their buffer up front: a declared length is a claim, and memory for a
    // large one is taken as its bytes arrive.
    if (declaredLength !== undefined && declaredLength > 0 && declaredLength <= Math.min(maxBytes, PREALLOCATED_BYTES)) {
      this.whole = Buffer.allocUnsafe(declaredLength);
    }
  }

  /**
   * Feeds one chunk the caller does not own (uWS reuses it after the callback): with a declared
   * length it is copied into the body's one buffer, otherwise into a chunk of its own.
   */
  copy(chunk: ArrayBuffer, isLast: boolean): void {
    const whole = this.whole;
    if (this.state.kind !== 'reading') return;
    if (whole === undefined || this.received + chunk.byteLength > whole.length) {
      // No declared length, or more bytes than it said: collected chunk by chunk.
      this.spill();
      this.push(Buffer.from(chunk.slice(0)), isLast);
      return;
    }
    whole.set(new Uint8Array(chunk), this.received);
    this.received += chunk.byteLength;
    if (!isLast) {
      this.wakeProgress();
      return;
    }
    this.settle({ kind: 'complete', body: this.received === whole.length ? whole : whole.subarray(0, this.received) });
  }

  /** Moves what the declared-length buffer holds into the chunk list (the fallback path). */
  private spill(): void {
    const whole = this.whole;
    if (whole === undefined) return;
    this.whole = undefined;
    // Bytes pieces() already handed out are not handed out again; from here `delivered` counts chunks.
    const start = this.streamed ? this.delivered : 0;
    this.delivered = 0;
    if (this.received > start) this.chunks.push(whole.subarray(start, this.received));
  }

  /**
   * A body that never arrives over the wire (no Content-Length, not chunked). One shared instance:
   * a complete collector never changes (push and abort ignore it) and its body has no bytes to alter.
   */
  static empty(): BodyCollector {
    return EMPTY_BODY;
  }

  /** A body refused up front from its declared length, before a byte is read. */
  static refused(maxBytes: number, error: ApiError): BodyCollector {
    return new BodyCollector(maxBytes, { kind: 'failed', error });
  }

  /** Feeds one chunk; `chunk` must already be a copy (uWS neuters its buffer on return). */
  push(chunk: Buffer, isLast: boolean): void {
    if (this.state.kind !== 'reading') return;
    this.received += chunk.length;
    if (this.received > this.maxBytes) {
      this.chunks = [];
      this.settle({ kind: 'failed', error: tooLarge(this.maxBytes) });
      return;
    }
    if (chunk.length > 0) this.chunks.push(chunk);
    if (!isLast) {
      this.wakeProgress();
      return;
    }
    // A streamed body is never joined: pieces() hands out the chunks it has not yet.
    if (this.streamed) this.settle({ kind: 'complete', body: EMPTY });
    else {
      const body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.received);
      this.chunks = [];
      this.settle({ kind: 'complete', body });
    }
  }

  /** Called when the client went away mid-body. */
  abort(): void {
    if (this.state.kind === 'reading')
      this.settle({ kind: 'failed', error: new ApiError('invalid_request', 'The client closed the connection.') });
  }

  /** True when a limit was passed and the rest of the body should not be read. */
  get overflowed(): boolean {
    return this.state.kind === 'failed' && this.state.error.code === 'payload_too_large';
  }

  /** Resolves with the whole body or rejects with the ApiError that stopped it. */
  async bytes(): Promise<Buffer> {
    while (this.state.kind === 'reading') await new Promise<void>((resolve) => this.waiters.push(resolve));
    if (this.state.kind === 'failed') throw this.state.error;
    return this.state.body;
  }

  /**
   * The body as it arrives, piece by piece, for a consumer that parses as it goes (uploads); rejects
   * with the ApiError that stopped the body. Once called, `bytes()` is not available.
   */
  async *pieces(): AsyncGenerator<Buffer> {
    if (!this.streamed && this.state.kind === 'complete') {
      if (this.state.body.length > 0) yield this.state.body;
      return;
    }
    this.streamed = true;
    for (;;) {
      const whole = this.whole;
      if (whole !== undefined) {
        if (this.received > this.delivered) {
          const piece = whole.subarray(this.delivered, this.received);
          this.delivered = this.received;
          yield piece;
          continue;
        }
      } else if (this.delivered < this.chunks.length) {
        const piece = this.chunks[this.delivered] as Buffer;
        // Handed out: the collector keeps nothing of it.
        this.chunks[this.delivered] = EMPTY;
        this.delivered += 1;
        yield piece;
        continue;
      }
      if (this.state.kind === 'failed') throw this.state.error;
      if (this.state.kind === 'complete') {
        // A declared-length body ends with its whole buffer as the body: the rest of it is the last piece.
        const { body } = this.state;
        if (whole === undefined && body.length > this.delivered && this.chunks.length === 0) yield body.subarray(this.delivered);
        this.chunks = [];
        return;
      }
      await new Promise<void>((resolve) => {
        this.progress = resolve;
      });
    }
  }

  private wakeProgress(): void {
    const wake = this.progress;
    this.progress = undefined;
    wake?.();
  }

  private settle(state: BodyState): void {
    this.state = state;
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
    this.wakeProgress();
  }
}

const EMPTY = Buffer.alloc(0);
const EMPTY_BODY = new BodyCollector(0, { kind: 'complete', body: EMPTY });

/** The 413 error for a given limit. */
export function tooLarge(maxBytes: number): ApiError {
  return new ApiError('payload_too_large', `The request body is larger than ${maxBytes} bytes.`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Checks the content type, decodes strict UTF-8, caps nesting, parses JSON. */
export function parseJsonBody(contentType: string | undefined, body: Buffer, limits: BodyLimits): unknown {
  if (!isJsonContentType(contentType)) {
    throw new ApiError('unsupported_media_type', 'The request body must be sent as Content-Type: application/json.');
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new ApiError('invalid_json', 'The request body is not valid UTF-8.');
  }
  const depth = jsonDepth(text);
  if (depth > limits.maxDepth) {
    throw new ApiError('invalid_json', `The JSON body nests deeper than ${limits.maxDepth} levels.`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError('invalid_json', `The request body is not valid JSON: ${(error as Error).message}`);
  }
}

/** True for `application/json` and `application/<x>+json`, with any parameters. */
function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** Maximum nesting of arrays/objects, counted outside strings; linear, no allocation. */
function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 92 /* \ */) index += 1;
      else if (code === 34 /* " */) inString = false;
    } else if (code === 34) {
      inString = true;
    } else if (code === 123 /* { */ || code === 91 /* [ */) {
      depth += 1;
      if (depth > deepest) deepest = depth;
    } else if (code === 125 /* } */ || code === 93 /* ] */) {
      depth -= 1;
    }
  }
  return deepest;
}
