/**
 * Resumable generations: a chat whose client asked for `resumable: true` runs detached from the
 * request that started it. Its events get sequence numbers and go into a bounded log in storage;
 * any number of followers (the first request, later resumes) read from a sequence number on, live.
 * When the last follower leaves, generation goes on for `detached_timeout_s`, then stops. HTTP-free:
 * the routes encode what a follower reads.
 */
import { randomBytes } from 'node:crypto';
import { isoTime } from '../domain/iso-time.js';
import type { ChatEvent, QuotaStamp } from '../domain/types.js';
import { ServerShutdown } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LoggedEvent, StreamLogStore, StreamMeta } from '../store/types.js';
import type { CancelSignal } from '../domain/cancel.js';
import type { ChatSink } from './chat-job.js';

/** One event as followers read it, with what the NDJSON `result` line needs at `done`. */
export interface StreamEntry {
  seq: number;
  event: ChatEvent;
  /** At `done`: the whole reply as one result body (kept even when early events were dropped). */
  result?: Record<string, unknown>;
}

/** Why a generation was stopped on purpose (POST …/cancel). */
export class Cancelled extends Error {
  constructor() {
    super('The generation was cancelled.');
    this.name = 'Cancelled';
  }
}

/** Why a generation stopped with no client: none came back in time. */
export class DetachedTimeout extends Error {
  constructor() {
    super('No client came back in time.');
    this.name = 'DetachedTimeout';
  }
}

/** Hooks for metrics. */
export interface RunObserver {
  opened(): void;
  closed(outcome: 'completed' | 'expired' | 'cancelled' | 'failed', detached: boolean): void;
  logged(bytes: number): void;
}

/** What starting a run needs. */
export interface RunStart {
  owner: string;
  /** Runs the pipeline with the run's own signal (not the request's), pushing its events to `emit`; resolves once it ended. */
  events: (signal: CancelSignal, emit: ChatSink) => Promise<void>;
  /** Folds an event into the result body for the NDJSON `result` line; returns it at `done`. */
  collect: (event: ChatEvent) => Record<string, unknown> | undefined;
  /** Called once when the generation ended, however it ended (gives slots back). */
  onEnd: () => void;
  /** The quota stamp, for a `done` that a cancel writes. */
  quota: QuotaStamp;
  model: string;
}

/** A client reading a run: it says how far it has written, and when it leaves. */
export interface Follower {
  advance(seq: number): void;
  leave(): void;
}

/** One generation and its followers. */
export class ResumableRun {
  readonly id = `st_${randomBytes(12).toString('hex')}`;
  /** Recent entries in memory, for live followers (the log in storage holds what a resume needs). */
  private readonly recent: StreamEntry[] = [];
  private recentBytes = 0;
  /** Attached followers and the last sequence number each has written. */
  private readonly cursors = new Map<symbol, number>();
  private roomWaiters: Array<() => void> = [];
  private detachTimer: NodeJS.Timeout | undefined;
  private readonly controller = new AbortController();
  private wake: Array<() => void> = [];
  private pending: LoggedEvent[] = [];
  private flushing: Promise<unknown> = Promise.resolve();
  ended = false;
  lastSeq = 0;
  wasDetached = false;

  constructor(
    readonly owner: string,
    private readonly registry: ResumableRuns,
  ) {}

  /** Entries after `seq` still in memory, or undefined when some of them are only in storage. */
  entriesAfter(seq: number): StreamEntry[] | undefined {
    const first = this.recent[0]?.seq ?? this.lastSeq + 1;
    if (seq + 1 < first) return undefined;
    return this.recent.filter((entry) => entry.seq > seq);
  }

  /** Resolves when an entry after `seq` exists or the run ended. */
  waitAfter(seq: number): Promise<void> {
    if (this.lastSeq > seq || this.ended) return Promise.resolve();
    return new Promise((resolve) => this.wake.push(resolve));
  }

  /**
   * A follower arrived at `cursor`: no detached clock runs while one reads, and the events it has
   * not written yet stay in memory (a live follower is never handed a gap: the generation waits).
   */
  attach(cursor: number): Follower {
    const handle = Symbol('follower');
    this.cursors.set(handle, cursor);
    if (this.detachTimer) clearTimeout(this.detachTimer);
    this.detachTimer = undefined;
    return {
      advance: (seq) => {
        if (!this.cursors.has(handle)) return;
        this.cursors.set(handle, seq);
        this.wakeRoom();
      },
      leave: () => {
        if (!this.cursors.delete(handle)) return;
        this.wakeRoom();
        if (this.cursors.size === 0 && !this.ended) {
          this.wasDetached = true;
          this.detachTimer = setTimeout(() => this.stop(new DetachedTimeout()), this.registry.options.detachedTimeoutMs);
          this.detachTimer.unref();
        }
      },
    };
  }

  /** Writes what is pending to the log now; resolves once it is there. */
  flushNow(): Promise<unknown> {
    return this.pending.length > 0 ? this.flush() : this.flushing;
  }

  /** Drops the oldest entries past the byte bound, waiting while an attached follower still needs them. */
  private async makeRoom(signal: CancelSignal): Promise<void> {
    while (this.recentBytes > this.registry.options.maxBytes && this.recent.length > 1) {
      const oldest = this.recent[0];
      if (!oldest) return;
      let needed = false;
      for (const cursor of this.cursors.values()) if (cursor < oldest.seq) needed = true;
      if (needed && !signal.aborted) {
        await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
        continue;
      }
      this.recent.shift();
      this.recentBytes -= JSON.stringify(oldest).length;
    }
  }

  private wakeRoom(): void {
    const waiting = this.roomWaiters;
    this.roomWaiters = [];
    for (const resolve of waiting) resolve();
  }

  /** Stops generation (cancel, detached timeout, shutdown). */
  stop(reason: Error): void {
    if (!this.ended) this.controller.abort(reason);
  }

  /** Runs the generation to its end, logging every event. */
  async run(start: RunStart): Promise<void> {
    const signal = this.controller.signal;
    let outcome: 'completed' | 'expired' | 'cancelled' | 'failed' = 'completed';
    let finished = false;
    try {
      await start.events(signal, async (batch) => {
        for (const event of batch) {
          const result = start.collect(event);
          if (event.type === 'done' || event.type === 'error') finished = true;
          if (event.type === 'error') outcome = 'failed';
          this.push(event, result);
          await this.makeRoom(signal);
        }
        return true;
      });
      if (!finished) {
        // The pipeline stopped without a last event: say why, as the followers' last event.
        const reason = signal.reason;
        if (reason instanceof Cancelled) {
          outcome = 'cancelled';
          const done: ChatEvent = {
            type: 'done',
            finishReason: 'cancelled',
            usage: { input_tokens: 0, output_tokens: 0 },
            timestamp: isoTime(),
            model: start.model,
            attempts: [],
            quota: start.quota,
          };
          this.push(done, start.collect(done));
        } else if (reason instanceof DetachedTimeout) {
          outcome = 'expired';
          this.push({
            type: 'error',
            code: 'stream_expired',
            message: 'No client came back within resumable.detached_timeout_s, so the generation was stopped; the answer so far is kept.',
          });
        } else if (!(reason instanceof ServerShutdown)) {
          outcome = 'failed';
          this.push({ type: 'error', code: 'internal', message: 'The generation stopped unexpectedly.' });
        }
      }
    } catch (error) {
      outcome = 'failed';
      this.registry.logger?.error({ err: error, stream: this.id }, 'resumable generation failed');
      this.push({ type: 'error', code: 'internal', message: 'The generation stopped unexpectedly.' });
    } finally {
      this.ended = true;
      this.wakeRoom();
      if (this.detachTimer) clearTimeout(this.detachTimer);
      await this.flush(Date.now());
      this.wakeAll();
      start.onEnd();
      this.registry.ended(this, outcome);
    }
  }

  private push(event: ChatEvent, result?: Record<string, unknown>): void {
    this.lastSeq += 1;
    const entry: StreamEntry = { seq: this.lastSeq, event, ...(result ? { result } : {}) };
    const json = JSON.stringify(entry);
    this.recent.push(entry);
    this.recentBytes += json.length;
    this.pending.push({ seq: entry.seq, json });
    this.registry.observer?.logged(json.length);
    // Events of one tick go to storage in one transaction.
    if (this.pending.length === 1) queueMicrotask(() => void this.flush());
    this.wakeAll();
  }

  private flush(endedAt?: number): Promise<unknown> {
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing
      .then(() => (batch.length > 0 || endedAt !== undefined ? this.registry.log.append(this.id, batch, endedAt) : undefined))
      .catch((error: unknown) => this.registry.logger?.error({ err: error, stream: this.id }, 'writing a stream log failed'));
    return this.flushing;
  }

  private wakeAll(): void {
    const waiting = this.wake;
    this.wake = [];
    for (const resolve of waiting) resolve();
  }
}

/** The resumable generations of this process, and the logs of every process. */
export class ResumableRuns {
  private readonly runs = new Map<string, ResumableRun>();
  private sweeper: NodeJS.Timeout | undefined;
  private canceller: NodeJS.Timeout | undefined;

  constructor(
    readonly log: StreamLogStore,
    readonly options: { maxBytes: number; ttlMs: number; detachedTimeoutMs: number },
    readonly logger?: Logger,
    readonly observer?: RunObserver,
  ) {}

  /** Starts a run for `owner`: its log first (so a resume can find it at once), then the generation. */
  async start(start: RunStart): Promise<ResumableRun> {
    const run = new ResumableRun(start.owner, this);
    await this.log.create(run.id, start.owner);
    this.runs.set(run.id, run);
    this.observer?.opened();
    void run.run(start);
    return run;
  }

  /** The live run in this process, if any. */
  live(streamId: string): ResumableRun | undefined {
    return this.runs.get(streamId);
  }

  /** The stream as `owner` may see it: undefined for unknown, someone else's, or expired. */
  async visible(streamId: string, owner: string, now: number): Promise<StreamMeta | undefined> {
    const meta = await this.log.metaOf(streamId);
    if (!meta || meta.owner !== owner) return undefined;
    if (meta.ended_at !== null && now - meta.ended_at > this.options.ttlMs) return undefined;
    return meta;
  }

  ended(run: ResumableRun, outcome: 'completed' | 'expired' | 'cancelled' | 'failed'): void {
    this.runs.delete(run.id);
    this.observer?.closed(outcome, run.wasDetached);
  }

  /**
   * Every minute keeps this process's logs alive and removes expired ones; every quarter of a second
   * stops the runs whose cancel reached another process (timers do not hold the process).
   */
  startSweeping(): void {
    const sweep = () => {
      this.log
        .keepAlive([...this.runs.keys()])
        .then(() => this.log.sweep(Date.now() - this.options.ttlMs))
        .catch((error: unknown) => this.logger?.error({ err: error }, 'sweeping stream logs failed'));
    };
    this.sweeper = setInterval(sweep, 60_000);
    this.sweeper.unref();
    let polling = false;
    this.canceller = setInterval(() => {
      // One look at a time: a slow storage never piles the looks up.
      if (polling || this.runs.size === 0) return;
      polling = true;
      void this.pollCancels().finally(() => {
        polling = false;
      });
    }, 250);
    this.canceller.unref();
  }

  /** Stops the runs a cancel was recorded for in their logs (by any process). */
  private async pollCancels(): Promise<void> {
    try {
      for (const streamId of await this.log.cancelsRequested([...this.runs.keys()])) this.runs.get(streamId)?.stop(new Cancelled());
    } catch (error) {
      // Storage away for a moment: the next look tries again.
      this.logger?.debug({ err: error }, 'looking for cancels failed');
    }
  }

  /** Ends every run (shutdown): each stores its partial answer and tells its followers. */
  async shutdown(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.canceller) clearInterval(this.canceller);
    const running = [...this.runs.values()];
    for (const run of running) run.stop(new ServerShutdown());
    const deadline = Date.now() + 5000;
    while (this.runs.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
