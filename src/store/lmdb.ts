/**
 * One LMDB environment per data directory, opened once and injected. Sub-databases are opened
 * by name by the stores that own them.
 */
import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Storage, StorageHealth } from './types.js';

const META_CREATED = 'meta:created';
/** Where a sub-database opened with `sharedStructures` keeps its record structures. */
const SHARED_STRUCTURES = Symbol.for('structures');
/** Longest a deferred write waits for a transaction to ride before it is queued on its own. */
const DEFER_MS = 10;

interface DeferredWrite {
  write: () => Promise<unknown>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class LmdbStorage implements Storage {
  readonly engine = 'lmdb';
  readonly root: RootDatabase;
  private closed = false;
  /** Writes waiting to ride the next transaction (see defer). */
  private deferred: DeferredWrite[] = [];
  private deferTimer: NodeJS.Timeout | undefined;
  /** When the oldest of the writes waiting now was deferred. */
  private deferredSince = 0;
  /** The commits of the deferred writes queued last. */
  private deferredCommitted: Promise<unknown> = Promise.resolve();

  constructor(readonly path: string) {
    mkdirSync(path, { recursive: true });
    // noSubdir: false because lmdb-js otherwise treats a directory whose name has a dot
    // (`/tmp/tmp.x1Y`, `./data.v2`) as a single database file and fails to open it.
    this.root = open({ path, noSubdir: false, maxDbs: 64, compression: false, mapSize: 8 * 1024 ** 3 });
    if (this.root.get(META_CREATED) === undefined) this.root.putSync(META_CREATED, new Date().toISOString());
  }

  /**
   * Opens (or creates) a named sub-database with msgpack values. With `sharedStructures`, the
   * property names of its records are kept once in the database (lmdb-js's shared structures,
   * under a symbol key that range reads skip) instead of in every value: a read then decodes the
   * values only, where an inline record definition costs a few microseconds per read (the quota,
   * usage, key, user and session records every request reads or writes). Values written before
   * stay readable; values written with it are not readable by builds without it.
   */
  database<V = unknown, K extends string | number | (string | number)[] = string>(
    name: string,
    options: { sharedStructures?: boolean } = {},
  ): Database<V, K> {
    return this.root.openDB<V, K>(options.sharedStructures ? { name, sharedStructuresKey: SHARED_STRUCTURES } : { name });
  }

  /**
   * Queues writes that nothing waits on before answering (usage records): they are put in the
   * event turn of the next transaction a request starts here (runDeferred), so that they share its
   * commit instead of costing one of their own, or after DEFER_MS when none comes. `write` queues
   * asynchronous puts and returns their promise; the result resolves once they are committed.
   */
  defer(write: () => Promise<unknown>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.deferred.length === 0) this.deferredSince = performance.now();
      this.deferred.push({ write, resolve, reject });
      this.deferTimer ??= setTimeout(this.deferExpired, DEFER_MS);
    });
  }

  /**
   * The timer of the deferred writes fired. It is left armed when a transaction takes the writes
   * along (runDeferred), so a busy server sets one timer per DEFER_MS rather than one per request:
   * when it fires, the writes waiting then are queued on their own only if the oldest of them has
   * waited DEFER_MS, else the timer waits for the rest of that.
   */
  private readonly deferExpired = (): void => {
    this.deferTimer = undefined;
    if (this.deferred.length === 0) return;
    const waited = performance.now() - this.deferredSince;
    if (waited < DEFER_MS) this.deferTimer = setTimeout(this.deferExpired, DEFER_MS - waited);
    else this.runDeferred();
  };

  /** Queues the deferred writes now, in the caller's event turn: called before a transaction is queued. */
  runDeferred(): void {
    if (this.deferred.length === 0) return;
    const writes = this.deferred;
    this.deferred = [];
    this.deferredCommitted = Promise.allSettled(
      writes.map(({ write, resolve, reject }) => {
        let committed: Promise<unknown>;
        try {
          committed = write();
        } catch (error) {
          committed = Promise.reject(error);
        }
        committed.then(() => resolve(), reject);
        return committed;
      }),
    );
  }

  /** Queues the deferred writes and resolves once every write deferred so far is committed (readers that must see them). */
  async settleDeferred(): Promise<void> {
    this.runDeferred();
    await this.deferredCommitted;
  }

  async check(): Promise<StorageHealth> {
    const started = performance.now();
    try {
      const created = this.root.get(META_CREATED);
      const latency_ms = Math.round((performance.now() - started) * 1000) / 1000;
      if (typeof created !== 'string') return { ok: false, engine: this.engine, latency_ms, detail: 'metadata record missing' };
      return { ok: true, engine: this.engine, latency_ms };
    } catch (error) {
      return { ok: false, engine: this.engine, latency_ms: 0, detail: (error as Error).message };
    }
  }

  async flush(): Promise<void> {
    if (!this.closed) await this.root.flushed;
  }

  /**
   * lmdb-js serves reads from one snapshot until a timer of its own renews it (and after this
   * process's commits), so a commit of another process can be missing from reads for a
   * millisecond or more: a key created through one worker was refused by the other. Dropping the
   * snapshot here makes the next read take a new one (about 0.4 µs).
   */
  freshen(): void {
    if (!this.closed) this.root.resetReadTxn();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.settleDeferred();
    clearTimeout(this.deferTimer);
    this.deferTimer = undefined;
    await this.flush();
    this.closed = true;
    await this.root.close();
  }
}
