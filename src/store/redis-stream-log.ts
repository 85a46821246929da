/**
 * The event logs of resumable streams in Redis, so a stream started on one node is resumed and
 * cancelled through any other node sharing the Redis. `stream:{id}` is a hash of the meta (owner,
 * first and last sequence numbers, bytes, end time, cancel flag), `stream-events:{id}` a hash of
 * sequence number → logged event, and `streams-running` a sorted set of the logs not ended yet by
 * the time of their last write (epoch ms).
 *
 * An append is one Lua script: events written, the oldest dropped past the byte bound (UTF-8 bytes),
 * and at the end `ended_at` set, both keys given the TTL and the log taken out of the running set.
 * Redis's expiry thus removes ended logs; the sweep removes the logs whose process went away
 * before ending them (no write and no keep-alive for `staleMs`).
 */
import { LuaScript } from './redis-quota.js';
import type { RedisStorage } from './redis.js';
import type { LoggedEvent, StreamLogStore, StreamMeta } from './types.js';

/**
 * KEYS: meta, events, running set; ARGV: stream id, byte bound, end time ('' while running), TTL ms,
 * now ms, then a sequence number and its JSON per event. Returns {owner, first, last, bytes, ended
 * at ('' while running), cancel requested ('' or '1')}, or nil for an unknown log.
 */
const APPEND = new LuaScript(`
local m = redis.call('HMGET', KEYS[1], 'owner', 'first_seq', 'last_seq', 'bytes', 'ended_at', 'cancel_requested')
if not m[1] then return false end
local first, last, bytes = tonumber(m[2]), tonumber(m[3]), tonumber(m[4])
local max = tonumber(ARGV[2])
for i = 6, #ARGV, 2 do
  local json = ARGV[i + 1]
  redis.call('HSET', KEYS[2], ARGV[i], json)
  last = tonumber(ARGV[i])
  bytes = bytes + #json
end
-- The newest window is kept: the oldest events go first, at least the newest one stays.
while bytes > max and first < last do
  local dropped = redis.call('HGET', KEYS[2], first)
  if dropped then
    bytes = bytes - #dropped
    redis.call('HDEL', KEYS[2], first)
  end
  first = first + 1
end
redis.call('HSET', KEYS[1], 'first_seq', first, 'last_seq', last, 'bytes', bytes)
local ended = m[5]
if ARGV[3] ~= '' then
  ended = ARGV[3]
  redis.call('HSET', KEYS[1], 'ended_at', ended)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('ZREM', KEYS[3], ARGV[1])
elseif not ended then
  redis.call('ZADD', KEYS[3], tonumber(ARGV[5]), ARGV[1])
end
return { m[1], first, last, bytes, ended or '', m[6] or '' }
`);

/** KEYS: meta; 1 when the cancel was recorded, 0 when the log is unknown or ended. */
const REQUEST_CANCEL = new LuaScript(`
local m = redis.call('HMGET', KEYS[1], 'owner', 'ended_at')
if not m[1] or m[2] then return 0 end
redis.call('HSET', KEYS[1], 'cancel_requested', '1')
return 1
`);

/**
 * KEYS: meta, events; ARGV: after this sequence number, at most this many. Returns {last sequence
 * number looked at, last written, then a sequence number and its JSON per kept event}.
 */
const READ = new LuaScript(`
local m = redis.call('HMGET', KEYS[1], 'first_seq', 'last_seq')
if not m[1] then return { 0, 0 } end
local from = math.max(tonumber(ARGV[1]) + 1, tonumber(m[1]))
local last = tonumber(m[2])
local to = math.min(last, from + tonumber(ARGV[2]) - 1)
if to < from then return { to, last } end
local fields = {}
for seq = from, to do fields[#fields + 1] = seq end
local values = redis.call('HMGET', KEYS[2], unpack(fields))
local out = { to, last }
for i = 1, #fields do
  if values[i] then
    out[#out + 1] = fields[i]
    out[#out + 1] = values[i]
  end
end
return out
`);

/** KEYS: meta, events, running set; ARGV: stream id, cutoff ms. Removes the log if it is still silent since before the cutoff. */
const SWEEP_ONE = new LuaScript(`
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not score or tonumber(score) >= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
`);

/** Events read per round trip by `after`. */
const PAGE = 256;

export interface RedisStreamLogOptions {
  /** The byte bound of one log. */
  maxBytes: number;
  /** How long an ended log is kept (ms). */
  ttlMs: number;
  /** A log not ended, neither written nor kept alive for this long, was left by a process that went away (ms). */
  staleMs?: number;
}

/** The Redis-backed stream logs. */
export class RedisStreamLog implements StreamLogStore {
  private readonly staleMs: number;

  constructor(
    private readonly storage: RedisStorage,
    private readonly options: RedisStreamLogOptions,
  ) {
    this.staleMs = options.staleMs ?? 5 * 60_000;
  }

  private keys(streamId: string): [string, string, string] {
    const id = encodeURIComponent(streamId);
    return [this.storage.key(`stream:${id}`), this.storage.key(`stream-events:${id}`), this.storage.key('streams-running')];
  }

  async create(streamId: string, owner: string): Promise<void> {
    const [meta, events, running] = this.keys(streamId);
    await this.storage.call((client) =>
      client
        .multi()
        .del([meta, events])
        .hSet(meta, { owner, first_seq: '1', last_seq: '0', bytes: '0' })
        .zAdd(running, { score: Date.now(), value: streamId })
        .exec(),
    );
  }

  async append(streamId: string, entries: readonly LoggedEvent[], endedAt?: number): Promise<StreamMeta | undefined> {
    const args = [
      streamId,
      String(this.options.maxBytes),
      endedAt === undefined ? '' : String(endedAt),
      String(Math.max(1, this.options.ttlMs)),
      String(Date.now()),
    ];
    for (const entry of entries) args.push(String(entry.seq), entry.json);
    const reply = (await this.storage.call((client) => APPEND.run(client, this.keys(streamId), args))) as
      | [string, number, number, number, string, string]
      | null;
    if (!reply) return undefined;
    const [owner, first, last, bytes, ended, cancel] = reply;
    return {
      owner,
      first_seq: Number(first),
      last_seq: Number(last),
      bytes: Number(bytes),
      ended_at: ended === '' ? null : Number(ended),
      ...(cancel === '1' ? { cancel_requested: true } : {}),
    };
  }

  async requestCancel(streamId: string): Promise<boolean> {
    const [meta] = this.keys(streamId);
    return (await this.storage.call((client) => REQUEST_CANCEL.run(client, [meta], []))) === 1;
  }

  async metaOf(streamId: string): Promise<StreamMeta | undefined> {
    const [key] = this.keys(streamId);
    const meta = await this.storage.call((client) => client.hGetAll(key));
    if (meta.owner === undefined) return undefined;
    return {
      owner: meta.owner,
      first_seq: Number(meta.first_seq),
      last_seq: Number(meta.last_seq),
      bytes: Number(meta.bytes),
      ended_at: meta.ended_at === undefined ? null : Number(meta.ended_at),
      ...(meta.cancel_requested === '1' ? { cancel_requested: true } : {}),
    };
  }

  async cancelsRequested(streamIds: readonly string[]): Promise<string[]> {
    if (streamIds.length === 0) return [];
    // Sent together: node-redis writes the commands of one tick as one pipeline.
    const flags = await this.storage.call((client) =>
      Promise.all(streamIds.map((streamId) => client.hGet(this.keys(streamId)[0], 'cancel_requested'))),
    );
    return streamIds.filter((_, index) => flags[index] === '1');
  }

  async *after(streamId: string, afterSeq: number): AsyncGenerator<LoggedEvent> {
    const [meta, events] = this.keys(streamId);
    let cursor = afterSeq;
    for (;;) {
      const reply = (await this.storage.call((client) => READ.run(client, [meta, events], [String(cursor), String(PAGE)]))) as Array<
        number | string
      >;
      const to = Number(reply[0]);
      const last = Number(reply[1]);
      for (let index = 2; index + 1 < reply.length; index += 2) yield { seq: Number(reply[index]), json: String(reply[index + 1]) };
      if (to <= cursor || to >= last) return;
      cursor = to;
    }
  }

  async keepAlive(streamIds: readonly string[]): Promise<void> {
    if (streamIds.length === 0) return;
    const [, , running] = this.keys('');
    const now = Date.now();
    await this.storage.call((client) =>
      client.zAdd(
        running,
        streamIds.map((value) => ({ score: now, value })),
        { condition: 'XX' },
      ),
    );
  }

  /** Ended logs expire by themselves; this removes the running ones silent for `staleMs` (`before` is not needed). */
  async sweep(_before: number, limit = 1000): Promise<number> {
    const [, , running] = this.keys('');
    const cutoff = Date.now() - this.staleMs;
    const stale = await this.storage.call((client) =>
      client.zRangeByScore(running, '-inf', `(${cutoff}`, { LIMIT: { offset: 0, count: limit } }),
    );
    let removed = 0;
    for (const streamId of stale) {
      const gone = await this.storage.call((client) => SWEEP_ONE.run(client, this.keys(streamId), [streamId, String(cutoff)]));
      if (gone === 1) removed += 1;
    }
    return removed;
  }
}
