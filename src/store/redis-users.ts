/**
 * Users in Redis: `user:{id}` holds the record as JSON, and the sorted set `users` (every score 0)
 * lists the ids in byte order, so a listing pages with ZRANGE BYLEX like LMDB's range read.
 * Create and plan changes are Lua scripts: check and write in one step on every node. Lookups are
 * cached for at most a second per node (redis-cache.ts).
 */
import type { SharedRecordCache } from './redis-cache.js';
import { LuaScript } from './redis-quota.js';
import type { RedisStorage } from './redis.js';
import type { RecordTransfer, UserRecord, UserStore } from './types.js';

/** Users read per page by an export. */
const EXPORT_PAGE = 500;

/** KEYS: record, index; ARGV: id, record JSON. 1 when created, 0 when the id is taken. */
const CREATE = new LuaScript(`
if redis.call('SET', KEYS[1], ARGV[2], 'NX') == false then return 0 end
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
`);

/** KEYS: record; ARGV: plan. The updated JSON, or false when there is no such user. */
const SET_PLAN = new LuaScript(`
local stored = redis.call('GET', KEYS[1])
if not stored then return false end
local record = cjson.decode(stored)
record.plan = ARGV[1]
local updated = cjson.encode(record)
redis.call('SET', KEYS[1], updated)
return updated
`);

/** The Redis-backed user store. */
export class RedisUserStore implements UserStore, RecordTransfer<UserRecord> {
  constructor(
    private readonly storage: RedisStorage,
    private readonly cache: SharedRecordCache,
  ) {}

  private recordKey(userId: string): string {
    return this.storage.key(`user:${userId}`);
  }

  /** Cached for at most a second on this node (a plan change is announced to every node). */
  get(userId: string): Promise<UserRecord | undefined> {
    return this.cache.get(`user:${userId}`, async () => {
      const stored = await this.storage.call((client) => client.get(this.recordKey(userId)));
      return stored ? (JSON.parse(stored) as UserRecord) : undefined;
    });
  }

  async create(userId: string, plan: string): Promise<boolean> {
    const record: UserRecord = { user_id: userId, plan, created: new Date().toISOString() };
    const keys = [this.recordKey(userId), this.storage.key('users')];
    const created = await this.storage.call((client) => CREATE.run(client, keys, [userId, JSON.stringify(record)]));
    return created === 1;
  }

  async setPlan(userId: string, plan: string): Promise<UserRecord | undefined> {
    const updated = await this.storage.call((client) => SET_PLAN.run(client, [this.recordKey(userId)], [plan]));
    if (typeof updated !== 'string') return undefined;
    await this.cache.invalidate(`user:${userId}`);
    const record = JSON.parse(updated) as UserRecord;
    // cjson may reorder fields: answer in the record's own order.
    return { user_id: record.user_id, plan: record.plan, created: record.created };
  }

  async list(options: { limit: number; after?: string }): Promise<UserRecord[]> {
    const ids = await this.storage.call((client) =>
      client.zRange(this.storage.key('users'), options.after ? `(${options.after}` : '-', '+', {
        BY: 'LEX',
        LIMIT: { offset: 0, count: options.limit },
      }),
    );
    if (ids.length === 0) return [];
    const stored = await this.storage.call((client) => client.mGet(ids.map((id) => this.recordKey(id))));
    return stored.filter((value): value is string => typeof value === 'string').map((value) => JSON.parse(value) as UserRecord);
  }

  async *exportRecords(): AsyncGenerator<UserRecord> {
    let after: string | undefined;
    for (;;) {
      const page = await this.list({ limit: EXPORT_PAGE, after });
      yield* page;
      if (page.length < EXPORT_PAGE) return;
      after = page[page.length - 1]?.user_id;
    }
  }

  async importRecord(record: UserRecord): Promise<void> {
    const stored: UserRecord = { user_id: record.user_id, plan: record.plan, created: record.created };
    await this.storage.call((client) =>
      client
        .multi()
        .set(this.recordKey(record.user_id), JSON.stringify(stored))
        .zAdd(this.storage.key('users'), { score: 0, value: record.user_id })
        .exec(),
    );
  }
}
