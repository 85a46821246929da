/**
 * A streamed response body with pull-based backpressure: each frame is written once; when uWS
 * reports backpressure (write() false, the bytes are already buffered), the writer waits for
 * onWritable before accepting the next frame, so a slow reader holds at most one frame beyond the
 * socket buffer and the producer pauses.
 */
import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import type { ResponseStream } from './types.js';

export interface StreamHooks {
  /** Counted each time the writer has to wait for the client to drain. */
  onBackpressure(): void;
}

/**
 * One timer for the heartbeats of every stream with the same interval, instead of a timer per
 * stream re-armed on every write: with 10k open streams a write then costs a timestamp, and the
 * wheel looks at each stream a few times per interval.
 */
class HeartbeatWheel {
  private static readonly wheels = new Map<string, HeartbeatWheel>();
  private readonly streams = new Set<UwsResponseStream>();
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly intervalMs: number,
    private readonly frame: string,
  ) {}

  /** The wheel for an interval and frame, shared by every stream that uses them. */
  static for(intervalMs: number, frame: string): HeartbeatWheel {
    const key = `${intervalMs}\n${frame}`;
    let wheel = HeartbeatWheel.wheels.get(key);
    if (!wheel) {
      wheel = new HeartbeatWheel(intervalMs, frame);
      HeartbeatWheel.wheels.set(key, wheel);
    }
    return wheel;
  }

  add(stream: UwsResponseStream): void {
    this.streams.add(stream);
    if (!this.timer) {
      // A few looks per interval: a ping goes out between 1 and 1.25 intervals of silence.
      this.timer = setInterval(() => this.tick(), Math.max(1, Math.floor(this.intervalMs / 4)));
      this.timer.unref();
    }
  }

  remove(stream: UwsResponseStream): void {
    this.streams.delete(stream);
    if (this.streams.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private tick(): void {
    const now = performance.now();
    for (const stream of this.streams) stream.pingIfSilent(now, this.intervalMs, this.frame);
  }
}

export class UwsResponseStream implements ResponseStream {
  private drainWaiter: ((open: boolean) => void) | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private readonly heartbeat: HeartbeatWheel | undefined;
  /** performance.now() of the last frame written (the heartbeat's silence is measured from it). */
  private lastWriteAt = performance.now();
  private ended = false;
  private aborted = false;
  /** The frame being written inside the cork callback (one callback per stream, not one closure per frame). */
  private frame = '';
  private accepted = true;
  private readonly corked = (): void => {
    this.accepted = this.response.write(this.frame);
  };

  constructor(
    private readonly response: HttpResponse,
    private readonly hooks: StreamHooks,
    private readonly options: { heartbeat: { intervalMs: number; frame: string } | undefined; stallTimeoutMs: number },
    private readonly onFinish: () => void,
  ) {
    // One onWritable per response (a second would replace it): it only wakes the waiting writer,
    // because the frame that hit backpressure is already buffered inside uWS.
    response.onWritable(() => {
      this.wake(true);
      return true;
    });
    if (options.heartbeat) {
      this.heartbeat = HeartbeatWheel.for(options.heartbeat.intervalMs, options.heartbeat.frame);
      this.heartbeat.add(this);
    }
  }

  /** Writes the heartbeat frame after `intervalMs` of silence (never while waiting on a slow client). */
  pingIfSilent(now: number, intervalMs: number, frame: string): void {
    if (this.closed || this.drainWaiter || now - this.lastWriteAt < intervalMs) return;
    void this.write(frame);
  }

  get closed(): boolean {
    return this.ended || this.aborted;
  }

  /**
   * True at once when the client took the frame; a promise (false once the client left) only when
   * the writer has to wait for it to drain, so a stream that keeps up costs no promise per frame.
   */
  write(frame: string): boolean | Promise<boolean> {
    // Frames are written strictly one after another; a caller that did not wait is serialised here.
    if (this.drainWaiter && !this.closed) return this.writeAfterDrain(frame);
    if (this.closed) return false;
    this.frame = frame;
    this.response.cork(this.corked);
    this.frame = '';
    this.lastWriteAt = performance.now();
    if (this.accepted) return true;
    this.hooks.onBackpressure();
    return this.waitForDrain();
  }

  private async writeAfterDrain(frame: string): Promise<boolean> {
    while (this.drainWaiter && !this.closed) await this.waitForDrain();
    return this.write(frame);
  }

  end(): void {
    if (this.closed) return;
    this.ended = true;
    this.heartbeat?.remove(this);
    this.response.cork(() => this.response.end());
    this.wake(false);
    this.onFinish();
  }

  /** Called by the request owner when the client disconnected. */
  markAborted(): void {
    if (this.closed) return;
    this.aborted = true;
    this.heartbeat?.remove(this);
    this.wake(false);
    this.onFinish();
  }

  private waitForDrain(): Promise<boolean> {
    // A client that stops reading for good would otherwise hold this stream, and its upstream
    // request, forever: past the stall timeout the connection is closed, which fires onAborted.
    this.stallTimer ??= setTimeout(() => {
      this.stallTimer = undefined;
      if (!this.closed) this.response.close();
    }, this.options.stallTimeoutMs);
    this.stallTimer.unref();
    return new Promise<boolean>((resolve) => {
      const previous = this.drainWaiter;
      this.drainWaiter = (open) => {
        previous?.(open);
        resolve(open);
      };
    });
  }

  private wake(open: boolean): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    const waiter = this.drainWaiter;
    this.drainWaiter = undefined;
    waiter?.(open && !this.closed);
  }
}
