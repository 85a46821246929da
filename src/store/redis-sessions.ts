/**
 * Owner-scoped chat sessions in Redis. `session:{owner}:{id}` is a hash of the meta (created,
 * updated, first and next turn sequence numbers), `session-turns:{owner}:{id}` a list of the kept
 * turns as JSON, and `sessions:{owner}` a sorted set of the owner's session ids by last update.
 * Owner and id are URI-encoded in key names, so no pair of them can name another's keys. An
 * append is one Lua script (turns pushed, the list trimmed to the cap, meta and index written),
 * so concurrent appends from any nodes never lose or reorder a turn.
 */
import { LuaScript } from './redis-quota.js';
import type { RedisStorage } from './redis.js';
import { scanNames } from './redis-scan.js';
import type { ExportedSession, RecordTransfer, SessionMessage, SessionRecord, SessionStore, SessionSummary } from './types.js';

/**
 * KEYS: meta, turns, owner index; ARGV: now (ISO), now (ms), session id, cap, turns skipped
 * (beyond the cap, never written), then one JSON turn per argument.
 */
const APPEND = new LuaScript(`
local meta = redis.call('HMGET', KEYS[1], 'created', 'first', 'next')
local created, first, next = meta[1], tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
if not created then created = ARGV[1] end
local cap = tonumber(ARGV[4])
next = next + tonumber(ARGV[5])
for i = 6, #ARGV do
  redis.call('RPUSH', KEYS[2], ARGV[i])
  next = next + 1
end
first = math.max(first, next - cap)
redis.call('LTRIM', KEYS[2], -cap, -1)
redis.call('HSET', KEYS[1], 'created', created, 'updated', ARGV[1], 'first', first, 'next', next)
redis.call('ZADD', KEYS[3], tonumber(ARGV[2]), ARGV[3])
return next - first
`);

/** KEYS: meta, turns, owner index; ARGV: session id. 1 when deleted, 0 when absent. */
const DELETE = new LuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
`);

/** The Redis-backed session store; keeps at most `maxTurns` turns per session (oldest dropped first). */
export class RedisSessionStore implements SessionStore, RecordTransfer<ExportedSession> {
  constructor(
    private readonly storage: RedisStorage,
    private readonly maxTurns: number,
  ) {}

  private keys(owner: string, sessionId: string): [string, string, string] {
    const name = `${encodeURIComponent(owner)}:${encodeURIComponent(sessionId)}`;
    return [
      this.storage.key(`session:${name}`),
      this.storage.key(`session-turns:${name}`),
      this.storage.key(`sessions:${encodeURIComponent(owner)}`),
    ];
  }

  async get(owner: string, sessionId: string, limit = this.maxTurns): Promise<SessionRecord | undefined> {
    const [metaKey, turnsKey] = this.keys(owner, sessionId);
    const count = Math.max(0, limit);
    // One MULTI: the meta and the turns are read at the same point of the session's history.
    const [meta, turns] = (await this.storage.call((client) =>
      client.multi().hGetAll(metaKey).lRange(turnsKey, -Math.max(1, count), -1).exec(),
    )) as unknown as [Record<string, string>, string[]];
    if (meta.created === undefined) return undefined;
    const first = Number(meta.first);
    const next = Number(meta.next);
    const messages = count === 0 ? [] : turns.map((turn) => JSON.parse(turn) as SessionMessage);
    return { session_id: sessionId, created: meta.created, updated: meta.updated ?? meta.created, message_count: next - first, messages };
  }

  async append(owner: string, sessionId: string, turns: SessionMessage[]): Promise<void> {
    if (turns.length === 0) return;
    // Turns beyond the cap would be trimmed at once; never write them.
    const kept = turns.length > this.maxTurns ? turns.slice(turns.length - this.maxTurns) : turns;
    const now = new Date();
    const stored = kept.map((turn) => {
      const record: SessionMessage = { role: turn.role, content: turn.content, timestamp: turn.timestamp };
      if (turn.tool_calls) record.tool_calls = turn.tool_calls;
      if (turn.tool_call_id !== undefined) record.tool_call_id = turn.tool_call_id;
      if (turn.incomplete) record.incomplete = true;
      return JSON.stringify(record);
    });
    const args = [
      now.toISOString(),
      String(now.getTime()),
      sessionId,
      String(this.maxTurns),
      String(turns.length - kept.length),
      ...stored,
    ];
    await this.storage.call((client) => APPEND.run(client, this.keys(owner, sessionId), args));
  }

  async delete(owner: string, sessionId: string): Promise<boolean> {
    const deleted = await this.storage.call((client) => DELETE.run(client, this.keys(owner, sessionId), [sessionId]));
    return deleted === 1;
  }

  async list(owner: string, limit: number): Promise<SessionSummary[]> {
    const [, , indexKey] = this.keys(owner, '');
    const ids = await this.storage.call((client) => client.zRange(indexKey, 0, Math.max(0, limit - 1), { REV: true }));
    if (ids.length === 0) return [];
    const metas = await this.storage.call((client) => {
      const batch = client.multi();
      for (const id of ids) batch.hGetAll(this.keys(owner, id)[0]);
      return batch.exec() as unknown as Promise<Record<string, string>[]>;
    });
    const summaries: SessionSummary[] = [];
    ids.forEach((id, index) => {
      const meta = metas[index];
      if (!meta || meta.created === undefined) return;
      summaries.push({
        session_id: id,
        message_count: Number(meta.next) - Number(meta.first),
        created: meta.created,
        updated: meta.updated ?? meta.created,
      });
    });
    return summaries;
  }

  /** Every owner's sessions (found by SCAN of their meta keys), each with all its kept turns. */
  async *exportRecords(): AsyncGenerator<ExportedSession> {
    const kind = 'session:';
    for await (const names of scanNames(this.storage, kind)) {
      for (const name of names) {
        const [owner, sessionId] = name.slice(kind.length).split(':').map(decodeURIComponent) as [string, string];
        const [metaKey, turnsKey] = this.keys(owner, sessionId);
        const [meta, turns] = (await this.storage.call((client) =>
          client.multi().hGetAll(metaKey).lRange(turnsKey, 0, -1).exec(),
        )) as unknown as [Record<string, string>, string[]];
        if (meta.created === undefined) continue;
        yield {
          owner,
          session_id: sessionId,
          created: meta.created,
          updated: meta.updated ?? meta.created,
          first: Number(meta.first),
          next: Number(meta.next),
          messages: turns.map((turn) => JSON.parse(turn) as SessionMessage),
        };
      }
    }
  }

  /** Replaces the session with the exported one in one MULTI: meta, turns and the owner's index. */
  async importRecord(session: ExportedSession): Promise<void> {
    const [metaKey, turnsKey, indexKey] = this.keys(session.owner, session.session_id);
    const first = session.next - session.messages.length;
    await this.storage.call((client) => {
      const batch = client.multi().del([metaKey, turnsKey]);
      if (session.messages.length > 0)
        batch.rPush(
          turnsKey,
          session.messages.map((turn) => JSON.stringify(turn)),
        );
      return batch
        .hSet(metaKey, { created: session.created, updated: session.updated, first: String(first), next: String(session.next) })
        .zAdd(indexKey, { score: Date.parse(session.updated) || 0, value: session.session_id })
        .exec();
    });
  }
}
