/**
 * API keys in Redis: hash `key:{id}` (the secret's SHA-256, never the key itself) and the sorted
 * set `user-keys:{user}` (scores 0, ids in byte order) for a user's listing. Revocation is a Lua
 * script that checks the owner and stamps `revoked_at` in one step; the revoking node drops its
 * cached copy in the same call and every other node hears it on the invalidation channel.
 * `touch` updates `last_used` field by field in Redis, so a cached record is never written back.
 */
import { LuaScript } from './redis-quota.js';
import type { SharedRecordCache } from './redis-cache.js';
import type { RedisStorage } from './redis.js';
import { scanNames } from './redis-scan.js';
import type { ApiKeyRecord, ApiKeyStore, RecordTransfer } from './types.js';

/** KEYS: key hash; ARGV: user id, time. 1 when revoked (or already), 0 when absent or another user's. */
const REVOKE = new LuaScript(`
if redis.call('HGET', KEYS[1], 'user_id') ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 0 then redis.call('HSET', KEYS[1], 'revoked_at', ARGV[2]) end
return 1
`);

/** KEYS: key hash; ARGV: time. Moves last_used forward only, and only on a key that exists. */
const TOUCH = new LuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local last = redis.call('HGET', KEYS[1], 'last_used')
if last and last >= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'last_used', ARGV[1])
return 1
`);

function fromHash(fields: Record<string, string>): ApiKeyRecord | undefined {
  if (fields.key_id === undefined || fields.user_id === undefined || fields.hash === undefined || fields.created === undefined)
    return undefined;
  return {
    key_id: fields.key_id,
    user_id: fields.user_id,
    hash: new Uint8Array(Buffer.from(fields.hash, 'base64')),
    name: fields.name,
    created: fields.created,
    last_used: fields.last_used,
    revoked_at: fields.revoked_at,
  };
}

/** A record as its hash's fields: unset fields are left out. */
function toHash(record: ApiKeyRecord): Record<string, string> {
  const fields: Record<string, string> = {
    key_id: record.key_id,
    user_id: record.user_id,
    hash: Buffer.from(record.hash).toString('base64'),
    created: record.created,
  };
  if (record.name !== undefined) fields.name = record.name;
  if (record.last_used !== undefined) fields.last_used = record.last_used;
  if (record.revoked_at !== undefined) fields.revoked_at = record.revoked_at;
  return fields;
}

/** The Redis-backed key store, with a per-node cache of lookups (at most a second old). */
export class RedisApiKeyStore implements ApiKeyStore, RecordTransfer<ApiKeyRecord> {
  constructor(
    private readonly storage: RedisStorage,
    private readonly cache: SharedRecordCache,
  ) {}

  private recordKey(keyId: string): string {
    return this.storage.key(`key:${keyId}`);
  }

  private async read(keyId: string): Promise<ApiKeyRecord | undefined> {
    return fromHash(await this.storage.call((client) => client.hGetAll(this.recordKey(keyId))));
  }

  get(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.cache.get(`key:${keyId}`, () => this.read(keyId));
  }

  async add(record: ApiKeyRecord): Promise<void> {
    const fields = toHash(record);
    await this.storage.call((client) =>
      client
        .multi()
        .hSet(this.recordKey(record.key_id), fields)
        .zAdd(this.storage.key(`user-keys:${record.user_id}`), { score: 0, value: record.key_id })
        .exec(),
    );
  }

  async listForUser(userId: string, limit: number): Promise<ApiKeyRecord[]> {
    const ids = await this.storage.call((client) =>
      client.zRange(this.storage.key(`user-keys:${userId}`), '-', '+', { BY: 'LEX', LIMIT: { offset: 0, count: limit } }),
    );
    const records = await Promise.all(ids.map((id) => this.read(id)));
    return records.filter((record): record is ApiKeyRecord => record !== undefined);
  }

  async revoke(userId: string, keyId: string): Promise<boolean> {
    const revoked = await this.storage.call((client) => REVOKE.run(client, [this.recordKey(keyId)], [userId, new Date().toISOString()]));
    if (revoked !== 1) return false;
    await this.cache.invalidate(`key:${keyId}`);
    return true;
  }

  touch(keyId: string, at: string): void {
    // Best effort: a lost last_used update is harmless, so it is not awaited by the request.
    void this.storage.call((client) => TOUCH.run(client, [this.recordKey(keyId)], [at])).catch(() => undefined);
  }

  /** Every key, found by SCAN and read batch by batch. */
  async *exportRecords(): AsyncGenerator<ApiKeyRecord> {
    for await (const names of scanNames(this.storage, 'key:')) {
      const hashes = await this.storage.call((client) => {
        const batch = client.multi();
        for (const name of names) batch.hGetAll(this.storage.key(name));
        return batch.exec() as unknown as Promise<Record<string, string>[]>;
      });
      for (const fields of hashes) {
        const record = fromHash(fields);
        if (record) yield record;
      }
    }
  }

  /** Replaces the key's hash with the record's fields (last_used and revoked_at included) and lists it under its user. */
  async importRecord(record: ApiKeyRecord): Promise<void> {
    const key = this.recordKey(record.key_id);
    await this.storage.call((client) =>
      client
        .multi()
        .del(key)
        .hSet(key, toHash(record))
        .zAdd(this.storage.key(`user-keys:${record.user_id}`), { score: 0, value: record.key_id })
        .exec(),
    );
  }
}
