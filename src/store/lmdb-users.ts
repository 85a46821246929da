/** Users in LMDB: sub-database `users`, keyed by user id. */
import type { Database } from 'lmdb';
import type { RecordTransfer, UserRecord, UserStore } from './types.js';
import type { LmdbStorage } from './lmdb.js';
import { entriesInPages } from './lmdb-pages.js';

/** The LMDB-backed user store. */
export class LmdbUserStore implements UserStore, RecordTransfer<UserRecord> {
  private readonly db: Database<UserRecord, string>;

  constructor(storage: LmdbStorage) {
    this.db = storage.database<UserRecord, string>('users', { sharedStructures: true });
  }

  async get(userId: string): Promise<UserRecord | undefined> {
    return this.db.get(userId);
  }

  async create(userId: string, plan: string): Promise<boolean> {
    // Read and write in one transaction so two creators (or two processes) cannot both succeed.
    return this.db.transaction(() => {
      if (this.db.get(userId) !== undefined) return false;
      this.db.put(userId, { user_id: userId, plan, created: new Date().toISOString() });
      return true;
    });
  }

  async setPlan(userId: string, plan: string): Promise<UserRecord | undefined> {
    return this.db.transaction(() => {
      const existing = this.db.get(userId);
      if (existing === undefined) return undefined;
      const updated = { ...existing, plan };
      this.db.put(userId, updated);
      return updated;
    });
  }

  async list(options: { limit: number; after?: string }): Promise<UserRecord[]> {
    const users: UserRecord[] = [];
    for (const { key, value } of this.db.getRange({ start: options.after ?? '', limit: options.limit + 1 })) {
      if (key === options.after) continue;
      users.push(value);
      if (users.length === options.limit) break;
    }
    return users;
  }

  async *exportRecords(): AsyncGenerator<UserRecord> {
    for await (const { value } of entriesInPages(this.db)) yield value;
  }

  async importRecord(record: UserRecord): Promise<void> {
    await this.db.put(record.user_id, { user_id: record.user_id, plan: record.plan, created: record.created });
  }
}
