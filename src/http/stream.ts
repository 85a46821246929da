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

export class UwsResponseStream implements ResponseStream {
  private drainWaiter: ((open: boolean) => void) | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private ended = false;
  private aborted = false;
  /** Bytes handed to uWS; exposed for tests and metrics. */
  bytesWritten = 0;

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
    this.armHeartbeat();
  }

  get closed(): boolean {
    return this.ended || this.aborted;
  }

  async write(frame: string): Promise<boolean> {
    // Frames are written strictly one after another; a caller that did not await is serialised here.
    while (this.drainWaiter && !this.closed) await this.waitForDrain();
    if (this.closed) return false;
    let accepted = true;
    this.response.cork(() => {
      accepted = this.response.write(frame);
    });
    this.bytesWritten += Buffer.byteLength(frame);
    this.armHeartbeat();
    if (accepted) return true;
    this.hooks.onBackpressure();
    return this.waitForDrain();
  }

  end(): void {
    if (this.closed) return;
    this.ended = true;
    this.stopHeartbeat();
    this.response.cork(() => this.response.end());
    this.wake(false);
    this.onFinish();
  }

  /** Called by the request owner when the client disconnected. */
  markAborted(): void {
    if (this.closed) return;
    this.aborted = true;
    this.stopHeartbeat();
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

  private armHeartbeat(): void {
    if (!this.options.heartbeat || this.closed) return;
    this.stopHeartbeat();
    const { intervalMs, frame } = this.options.heartbeat;
    this.heartbeatTimer = setTimeout(() => {
      // Skip the ping while waiting for a drain: the client is already behind.
      if (!this.drainWaiter) void this.write(frame);
      else this.armHeartbeat();
    }, intervalMs);
    this.heartbeatTimer.unref();
  }

  private stopHeartbeat(): void {
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }
}
