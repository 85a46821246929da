/**
 * API keys in LMDB. `api-keys` maps key id → record (hash only) so a presented key is found
 * without scanning; `user-keys` maps [user id, key id] → 1 so a user's keys list with a bounded
 * range read.
 */
import type { Database } from 'lmdb';
import type { ApiKeyRecord, ApiKeyStore, RecordTransfer } from './types.js';
import type { LmdbStorage } from './lmdb.js';
import { entriesInPages } from './lmdb-pages.js';

interface StoredKey {
  key_id: string;
  user_id: string;
  hash: Uint8Array;
  name?: string;
  created: string;
  last_used?: string;
  revoked_at?: string;
}

function fromStored(stored: StoredKey): ApiKeyRecord {
  return {
    key_id: stored.key_id,
    user_id: stored.user_id,
    hash: stored.hash,
    name: stored.name,
    created: stored.created,
    last_used: stored.last_used,
    revoked_at: stored.revoked_at,
  };
}

/** A record as stored: fields that are unset are left out. */
function toStored(record: ApiKeyRecord): StoredKey {
  const stored: StoredKey = { key_id: record.key_id, user_id: record.user_id, hash: record.hash, created: record.created };
  if (record.name !== undefined) stored.name = record.name;
  if (record.last_used !== undefined) stored.last_used = record.last_used;
  if (record.revoked_at !== undefined) stored.revoked_at = record.revoked_at;
  return stored;
}

/** The LMDB-backed key store. */
export class LmdbApiKeyStore implements ApiKeyStore, RecordTransfer<ApiKeyRecord> {
  private readonly keys: Database<StoredKey, string>;
  private readonly byUser: Database<number, [string, string]>;

  constructor(storage: LmdbStorage) {
    this.keys = storage.database<StoredKey, string>('api-keys', { sharedStructures: true });
    this.byUser = storage.database<number, [string, string]>('user-keys');
  }

  async get(keyId: string): Promise<ApiKeyRecord | undefined> {
    const stored = this.keys.get(keyId);
    return stored ? fromStored(stored) : undefined;
  }

  async add(record: ApiKeyRecord): Promise<void> {
    const stored: StoredKey = { key_id: record.key_id, user_id: record.user_id, hash: record.hash, created: record.created };
    if (record.name !== undefined) stored.name = record.name;
    await this.keys.transaction(() => {
      this.keys.put(record.key_id, stored);
      this.byUser.put([record.user_id, record.key_id], 1);
    });
  }

  async listForUser(userId: string, limit: number): Promise<ApiKeyRecord[]> {
    const records: ApiKeyRecord[] = [];
    for (const keyId of this.byUser.getKeys({ start: [userId, ''], end: [userId, '\uffff'], limit })) {
      const stored = this.keys.get(keyId[1]);
      if (stored) records.push(fromStored(stored));
    }
    return records;
  }

  async revoke(userId: string, keyId: string): Promise<boolean> {
    return this.keys.transaction(() => {
      const stored = this.keys.get(keyId);
      if (!stored || stored.user_id !== userId) return false;
      if (stored.revoked_at === undefined) this.keys.put(keyId, { ...stored, revoked_at: new Date().toISOString() });
      return true;
    });
  }

  touch(keyId: string, at: string): void {
    // Best effort: a lost last_used update is harmless, so it is not awaited by the request.
    void this.keys
      .transaction(() => {
        const stored = this.keys.get(keyId);
        if (stored && (stored.last_used === undefined || stored.last_used < at)) this.keys.put(keyId, { ...stored, last_used: at });
      })
      .catch(() => undefined);
  }

  async *exportRecords(): AsyncGenerator<ApiKeyRecord> {
    for await (const { value } of entriesInPages(this.keys)) yield fromStored(value);
  }

  async importRecord(record: ApiKeyRecord): Promise<void> {
    await this.keys.transaction(() => {
      this.keys.put(record.key_id, toStored(record));
      this.byUser.put([record.user_id, record.key_id], 1);
    });
  }
}
