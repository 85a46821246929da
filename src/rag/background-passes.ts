/**
 * One background job run as passes, one at a time (the segment merges of both engines): a
 * schedule while a pass runs queues exactly one more, a failed pass is reported and the next
 * schedule tries again, and close() stops after the current step. A merger extends it with its
 * pass and its way of reporting a failed one.
 */
export abstract class BackgroundPasses {
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  /** One pass: it checks `closed` between its steps. */
  protected abstract pass(): Promise<void>;

  /** Reports a pass that failed (the next schedule tries again). */
  protected abstract failed(error: unknown): void;

  /** True once close() was called: a pass checks it between steps. */
  get closed(): boolean {
    return this.stopped;
  }

  /** Starts a pass when none runs (another is queued when one does). */
  schedule(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
  }

  /** Resolves when no pass is running or queued. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Stops after the current step; what is left is picked up at the next start. */
  async close(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }

  private async loop(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && !this.stopped);
    } catch (error) {
      this.failed(error);
    }
  }
}
