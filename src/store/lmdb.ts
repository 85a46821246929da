/**
 * One LMDB environment per data directory, opened once and injected. Sub-databases are opened
 * by name by the stores that own them.
 */
import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Storage, StorageHealth } from './types.js';

const META_CREATED = 'meta:created';

export class LmdbStorage implements Storage {
  readonly engine = 'lmdb';
  readonly root: RootDatabase;
  private closed = false;

  constructor(readonly path: string) {
    mkdirSync(path, { recursive: true });
    // noSubdir: false because lmdb-js otherwise treats a directory whose name has a dot
    // (`/tmp/tmp.x1Y`, `./data.v2`) as a single database file and fails to open it.
    this.root = open({ path, noSubdir: false, maxDbs: 64, compression: false, mapSize: 8 * 1024 ** 3 });
    if (this.root.get(META_CREATED) === undefined) this.root.putSync(META_CREATED, new Date().toISOString());
  }

  /** Opens (or creates) a named sub-database with msgpack values. */
  database<V = unknown, K extends string | number | (string | number)[] = string>(name: string): Database<V, K> {
    return this.root.openDB<V, K>({ name });
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

  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    await this.root.close();
  }
}
