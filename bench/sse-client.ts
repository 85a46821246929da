/**
 * A minimal HTTP/1.1 streaming client on raw sockets, cheap enough to hold ten thousand SSE streams
 * from one process and precise about timing: it records when the request went out, when the
 * first answer delta arrived and the gap between deltas, and it can stop reading (a stalled
 * reader) or disconnect on cue. Chunked transfer coding and SSE framing are decoded properly.
 */
import { connect, type Socket } from 'node:net';

/** How deltas and the end of a stream are recognised. */
export type Dialect = 'colloquy' | 'openai';

export interface StreamRequest {
  port: number;
  path: string;
  body: unknown;
  headers?: Record<string, string>;
  dialect: Dialect;
  /** Stop reading (socket.pause) once the first delta arrived. */
  stallAfterFirstDelta?: boolean;
  /** Called on the first delta (used to disconnect on cue). */
  onFirstDelta?(stream: SseStream): void;
}

type BodyState = 'size' | 'data' | 'data-crlf' | 'trailer' | 'done';

/** One streamed request and everything measured about it. */
export class SseStream {
  readonly socket: Socket;
  startedAt = 0;
  status = 0;
  firstDeltaAt = 0;
  lastDeltaAt = 0;
  deltas = 0;
  /** Milliseconds between consecutive deltas. */
  readonly gaps: number[] = [];
  /** Answer bytes received (decoded body). */
  bodyBytes = 0;
  completed = false;
  error: string | undefined;
  readonly finished: Promise<SseStream>;

  private resolveFinished!: (stream: SseStream) => void;
  private head = '';
  private headDone = false;
  private chunked = false;
  private state: BodyState = 'size';
  private sizeLine = '';
  private remaining = 0;
  private text = '';
  private stalled = false;

  constructor(private readonly request: StreamRequest) {
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
    const payload = Buffer.from(JSON.stringify(request.body));
    // Caller headers replace the defaults of the same name (a repeated Content-Type is a 400 on some servers).
    const headers = new Map<string, [string, string]>();
    const defaults: Record<string, string> = {
      Host: `127.0.0.1:${request.port}`,
      'Content-Type': 'application/json',
      Accept: 'text/event-stream',
    };
    for (const [name, value] of Object.entries({ ...defaults, ...request.headers })) headers.set(name.toLowerCase(), [name, value]);
    headers.set('content-length', ['Content-Length', String(payload.length)]);
    const headerLines = [`POST ${request.path} HTTP/1.1`, ...[...headers.values()].map(([name, value]) => `${name}: ${value}`), '', ''];
    this.socket = connect({ port: request.port, host: '127.0.0.1', noDelay: true });
    this.socket.on('connect', () => {
      this.startedAt = performance.now();
      this.socket.write(Buffer.concat([Buffer.from(headerLines.join('\r\n')), payload]));
    });
    this.socket.on('data', (data: Buffer) => this.onData(data));
    this.socket.on('error', (error) => this.finish(error.message));
    this.socket.on('close', () => this.finish(this.completed ? undefined : 'connection closed before the stream ended'));
  }

  /** Disconnects now (the abort scenario's cue). */
  destroy(): void {
    this.socket.destroy();
  }

  /** True while this client deliberately stopped reading. */
  get isStalled(): boolean {
    return this.stalled;
  }

  private finish(error: string | undefined): void {
    if (error && !this.error && !this.completed) this.error = error;
    this.resolveFinished(this);
  }

  private onData(data: Buffer): void {
    let body = data;
    if (!this.headDone) {
      this.head += data.toString('latin1');
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) return;
      const headText = this.head.slice(0, end);
      body = Buffer.from(this.head.slice(end + 4), 'latin1');
      this.headDone = true;
      this.status = Number(headText.slice(9, 12));
      this.chunked = /\r\ntransfer-encoding:\s*chunked/i.test(headText);
      if (this.status !== 200) {
        this.error = `http ${this.status}`;
        this.socket.destroy();
        return;
      }
    }
    if (this.chunked) this.decodeChunked(body);
    else this.onBodyText(body.toString('utf8'));
  }

  private decodeChunked(data: Buffer): void {
    let offset = 0;
    while (offset < data.length && this.state !== 'done') {
      if (this.state === 'size' || this.state === 'trailer') {
        const newline = data.indexOf(10, offset);
        if (newline < 0) {
          this.sizeLine += data.toString('latin1', offset);
          return;
        }
        const line = (this.sizeLine + data.toString('latin1', offset, newline)).replace(/\r$/, '');
        this.sizeLine = '';
        offset = newline + 1;
        if (this.state === 'trailer') {
          if (line === '') this.endOfBody();
          continue;
        }
        this.remaining = parseInt(line, 16);
        this.state = this.remaining === 0 ? 'trailer' : 'data';
      } else if (this.state === 'data') {
        const take = Math.min(this.remaining, data.length - offset);
        this.onBodyText(data.toString('utf8', offset, offset + take));
        offset += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = 'data-crlf';
      } else {
        // The CRLF after a chunk's data.
        const newline = data.indexOf(10, offset);
        if (newline < 0) return;
        offset = newline + 1;
        this.state = 'size';
      }
    }
  }

  private endOfBody(): void {
    this.state = 'done';
    if (!this.completed && !this.error) this.error = 'stream ended without a final event';
    this.socket.destroy();
  }

  private onBodyText(text: string): void {
    this.bodyBytes += text.length;
    this.text += text;
    for (let boundary = this.text.indexOf('\n\n'); boundary >= 0; boundary = this.text.indexOf('\n\n')) {
      const frame = this.text.slice(0, boundary);
      this.text = this.text.slice(boundary + 2);
      this.onFrame(frame);
    }
  }

  private onFrame(frame: string): void {
    let event = 'message';
    let data = '';
    for (const line of frame.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(5).replace(/^ /, '');
    }
    const kind = this.request.dialect === 'colloquy' ? colloquyKind(event) : openaiKind(data);
    if (kind === 'delta') this.onDelta();
    else if (kind === 'done') this.completed = true;
    else if (kind === 'error') this.error = `error event: ${data.slice(0, 200)}`;
  }

  private onDelta(): void {
    const now = performance.now();
    if (this.deltas === 0) {
      this.firstDeltaAt = now;
      this.request.onFirstDelta?.(this);
      if (this.request.stallAfterFirstDelta) {
        this.stalled = true;
        this.socket.pause();
      }
    } else {
      this.gaps.push(now - this.lastDeltaAt);
    }
    this.lastDeltaAt = now;
    this.deltas += 1;
  }
}

function colloquyKind(event: string): 'delta' | 'done' | 'error' | 'other' {
  if (event === 'delta') return 'delta';
  if (event === 'done') return 'done';
  if (event === 'error') return 'error';
  return 'other';
}

function openaiKind(data: string): 'delta' | 'done' | 'error' | 'other' {
  if (data === '[DONE]') return 'done';
  if (data.includes('"error"')) return 'error';
  // Only chunks carrying answer text count as deltas (not the role-only first chunk).
  return /"content":"[^"]/.test(data) ? 'delta' : 'other';
}

/** Opens `count` streams at `perSecond` (a steady ramp avoids overflowing the accept backlog). */
export async function openStreams(count: number, perSecond: number, make: (index: number) => StreamRequest): Promise<SseStream[]> {
  const streams: SseStream[] = [];
  const batch = Math.max(1, Math.round(perSecond / 100));
  const started = performance.now();
  for (let index = 0; index < count; index += batch) {
    for (let inner = index; inner < Math.min(count, index + batch); inner += 1) streams.push(new SseStream(make(inner)));
    const due = started + ((index + batch) / perSecond) * 1000;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  return streams;
}
