/**
 * Quota counters in Redis: hash `quota:{subject}` with the request window's start and units used
 * (`ws`, `used`) and, for plans with a token budget, the token window's (`tws`, `tused`).
 *
 * Each call is one Lua script, so read-check-take is atomic however many nodes share the Redis.
 * The window is placed by the Redis server's clock (`TIME`), not the node's, so nodes whose clocks
 * disagree still count in one window. A counter expires at the end of its latest window; an older
 * window's count reads as zero, as with LMDB. With `appendfsync always` a take is on disk before
 * Redis answers it, so `durable` is settled when the decision arrives. An imported counter
 * (`storage copy`) has no expiry until its next take sets one, as a counter written by LMDB never has.
 */
import type { RedisClient, RedisStorage } from './redis.js';
import { scanNames } from './redis-scan.js';
import type { CounterRecord, CounterTake, CounterWindow, QuotaCounterStore, RecordTransfer, TokenTake, WindowUse } from './types.js';

/** Redis's clock in epoch ms (ARGV[1] when a test gives its own clock), and a window's start by it. */
const CLOCK = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function start_of(length) return now - (now % length) end
-- Keeps the counter until the window that ends at \`at\` is over (relative to \`now\`, so a test's clock works too).
local function extend(key, at)
  local ttl = math.max(1, at - now)
  if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ttl) else redis.call('PEXPIRE', key, ttl, 'GT') end
end
`;

/**
 * KEYS[1] counter; ARGV: clock, window length, limit, cost, then (all empty without a token take)
 * token window length, token limit, token cost. Returns {ok, used, window start, tokens used, token
 * window start, refused by (1 requests, 2 tokens)}.
 */
const TAKE = `${CLOCK}
local length, limit, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ws = start_of(length)
local current = redis.call('HMGET', KEYS[1], 'ws', 'used', 'tws', 'tused')
local used = 0
if tonumber(current[1]) == ws then used = tonumber(current[2]) end
local requests_fit = used + cost <= limit
local with_tokens = ARGV[5] ~= ''
local tws, tused, tcost, tokens_fit = -1, 0, 0, true
if with_tokens then
  local tlength = tonumber(ARGV[5])
  tcost = tonumber(ARGV[7])
  tws = start_of(tlength)
  if tonumber(current[3]) == tws then tused = tonumber(current[4]) end
  -- A token debt (used past the limit by an earlier settle) refuses until the window resets.
  tokens_fit = tused + tcost <= tonumber(ARGV[6])
end
local ok = requests_fit and tokens_fit
if ok then
  used = used + cost
  tused = tused + tcost
  if cost > 0 or tcost > 0 then
    redis.call('HSET', KEYS[1], 'ws', ws, 'used', used)
    extend(KEYS[1], ws + length)
    if with_tokens then
      redis.call('HSET', KEYS[1], 'tws', tws, 'tused', tused)
      extend(KEYS[1], tws + tonumber(ARGV[5]))
    end
  end
end
local refused = 0
if not ok then if requests_fit then refused = 2 else refused = 1 end end
return { ok and 1 or 0, used, ws, tused, tws, refused }
`;

/** KEYS[1] counter; ARGV: field of the window start, field of the count, window start, delta. Returns the count after, or -1 when the window moved on. */
const ADJUST = `
local current = redis.call('HMGET', KEYS[1], ARGV[1], ARGV[2])
if tonumber(current[1]) ~= tonumber(ARGV[3]) then return -1 end
local value = math.max(0, tonumber(current[2]) + tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], ARGV[2], value)
return value
`;

/** KEYS[1] counter; ARGV: clock, field of the window start, field of the count, window length. Returns {count, window start}. */
const READ = `${CLOCK}
local ws = start_of(tonumber(ARGV[4]))
local current = redis.call('HMGET', KEYS[1], ARGV[2], ARGV[3])
if tonumber(current[1]) == ws then return { tonumber(current[2]), ws } end
return { 0, ws }
`;

/** A Lua script run by its SHA, loaded again when Redis forgot it (a restart, SCRIPT FLUSH). */
export class LuaScript {
  private sha: string | undefined;

  constructor(private readonly source: string) {}

  async run(client: RedisClient, keys: string[], args: string[]): Promise<unknown> {
    this.sha ??= await client.scriptLoad(this.source);
    try {
      return await client.evalSha(this.sha, { keys, arguments: args });
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      this.sha = await client.scriptLoad(this.source);
      return client.evalSha(this.sha, { keys, arguments: args });
    }
  }
}

const take = new LuaScript(TAKE);
const adjust = new LuaScript(ADJUST);
const read = new LuaScript(READ);
const settled = Promise.resolve();

/** The Redis-backed quota counters. */
export class RedisQuotaCounters implements QuotaCounterStore, RecordTransfer<CounterRecord> {
  /** `clock`: only tests set it (to cross a window edge at once); otherwise Redis's own TIME places windows. */
  constructor(
    private readonly storage: RedisStorage,
    private readonly clock?: () => number,
  ) {}

  private now(): string {
    return this.clock ? String(this.clock()) : '';
  }

  private key(subject: string): string {
    return this.storage.key(`quota:${subject}`);
  }

  async take(subject: string, window: CounterWindow, limit: number, cost: number, tokens?: TokenTake): Promise<CounterTake> {
    const args = [
      this.now(),
      ...[window.lengthMs, limit, cost, tokens?.window.lengthMs ?? '', tokens?.limit ?? '', tokens?.cost ?? ''].map(String),
    ];
    const reply = (await this.storage.call((client) => take.run(client, [this.key(subject)], args))) as number[];
    const [ok, used, windowStart, tokensUsed, tokenWindowStart, refused] = reply as [number, number, number, number, number, number];
    const decision: CounterTake = { ok: ok === 1, used, windowStart, durable: settled };
    if (tokens) {
      decision.tokensUsed = tokensUsed;
      decision.tokenWindowStart = tokenWindowStart;
    }
    if (refused !== 0) decision.refusedBy = refused === 2 ? 'tokens' : 'requests';
    return decision;
  }

  private async adjust(
    subject: string,
    startField: string,
    countField: string,
    windowStart: number,
    delta: number,
  ): Promise<number | undefined> {
    const args = [startField, countField, String(windowStart), String(delta)];
    const after = (await this.storage.call((client) => adjust.run(client, [this.key(subject)], args))) as number;
    return after < 0 ? undefined : after;
  }

  giveBack(subject: string, windowStart: number, cost: number): Promise<number | undefined> {
    return this.adjust(subject, 'ws', 'used', windowStart, -Math.max(0, cost));
  }

  adjustTokens(subject: string, windowStart: number, delta: number): Promise<number | undefined> {
    return this.adjust(subject, 'tws', 'tused', windowStart, delta);
  }

  private async read(subject: string, startField: string, countField: string, window: CounterWindow): Promise<WindowUse> {
    const args = [this.now(), startField, countField, String(window.lengthMs)];
    const [used, windowStart] = (await this.storage.call((client) => read.run(client, [this.key(subject)], args))) as [number, number];
    return { used, windowStart };
  }

  used(subject: string, window: CounterWindow): Promise<WindowUse> {
    return this.read(subject, 'ws', 'used', window);
  }

  tokensUsed(subject: string, window: CounterWindow): Promise<WindowUse> {
    return this.read(subject, 'tws', 'tused', window);
  }

  /** Every counter, found by SCAN: its windows and counts as stored (an old window's too). */
  async *exportRecords(): AsyncGenerator<CounterRecord> {
    const prefix = 'quota:';
    for await (const names of scanNames(this.storage, prefix)) {
      const replies = await this.storage.call((client) => {
        const batch = client.multi();
        for (const name of names) batch.hmGet(this.storage.key(name), ['ws', 'used', 'tws', 'tused']);
        return batch.exec() as unknown as Promise<(string | null)[][]>;
      });
      for (const [index, name] of names.entries()) {
        const [ws, used, tws, tused] = replies[index] ?? [];
        if (ws === null || ws === undefined) continue;
        const record: CounterRecord = { subject: name.slice(prefix.length), window_start: Number(ws), used: Number(used ?? 0) };
        if (tws !== null && tws !== undefined && Number(tws) >= 0) {
          record.tokens_window_start = Number(tws);
          record.tokens_used = Number(tused ?? 0);
        }
        yield record;
      }
    }
  }

  async importRecord(record: CounterRecord): Promise<void> {
    const fields: Record<string, string> = { ws: String(record.window_start), used: String(record.used) };
    if (record.tokens_window_start !== undefined) {
      fields.tws = String(record.tokens_window_start);
      fields.tused = String(record.tokens_used ?? 0);
    }
    const key = this.key(record.subject);
    await this.storage.call((client) => client.multi().del(key).hSet(key, fields).exec());
  }
}
