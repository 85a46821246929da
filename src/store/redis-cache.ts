/**
 * What one node may remember of shared records (API keys and users) for at most a second, so a
 * request does not pay a Redis round trip to resolve its caller each time. A change anywhere is
 * announced on the `invalidate` channel and dropped here at once; messages lost while the
 * subscription was down are covered by dropping everything when it reconnects, and by the TTL.
 * Cached records are only ever read from Redis, never written back.
 */
import type { RedisStorage } from './redis.js';

/** How long a cached record may be served without asking Redis again. */
export const CACHE_TTL_MS = 1000;
/** Entries kept at most (a flood of distinct keys cannot grow the map without bound). */
const CACHE_ENTRIES = 10_000;
const CHANNEL = 'invalidate';

export class SharedRecordCache {
  private readonly entries = new Map<string, { value: unknown; expires: number }>();
  private ready: Promise<void> | undefined;

  constructor(private readonly storage: RedisStorage) {}

  /** Subscribes once (lazily, at the first use). */
  private listen(): Promise<void> {
    this.ready ??= this.storage.subscribe(
      CHANNEL,
      (name) => this.entries.delete(name),
      () => this.entries.clear(),
    );
    return this.ready;
  }

  /** The cached value of `name`, or what `load` reads (cached when found). */
  async get<T>(name: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    void this.listen();
    const now = Date.now();
    const entry = this.entries.get(name);
    if (entry && entry.expires > now) return entry.value as T;
    const value = await load();
    if (value === undefined) {
      this.entries.delete(name);
      return undefined;
    }
    if (this.entries.size >= CACHE_ENTRIES) this.entries.clear();
    this.entries.set(name, { value, expires: now + CACHE_TTL_MS });
    return value;
  }

  /** Drops `name` here at once and tells every other node (best effort: the TTL bounds a lost message). */
  async invalidate(name: string): Promise<void> {
    this.entries.delete(name);
    await this.storage.publish(CHANNEL, name).catch(() => undefined);
  }
}
