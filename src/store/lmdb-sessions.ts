/**
 * Owner-scoped chat sessions in LMDB. `sessions` maps [owner, session id] → meta (created,
 * updated, the first and next turn sequence numbers); `session-messages` maps
 * [owner, session id, seq] → one turn. The owner is part of every key, so another owner's session
 * id is simply absent: it cannot be read, appended to or deleted. Reads of a whole session are
 * served from a per-process cache of decoded turns whenever the meta read shows it unchanged.
 *
 * A session keeps its newest `maxTurns` turns, first..next-1: reads, listings and exports see those
 * alone. Turns that fell below `first` leave storage TRIM_BATCH at a time (the meta's `stored` says
 * where they start) rather than one by one: on every append to a full session, removing the oldest
 * turns dirtied the B-tree page they sat in beside the page the new ones went to.
 */
import type { Database } from 'lmdb';
import { SESSION_CACHE_MB } from '../config/defaults.js';
import { isoTime } from '../domain/iso-time.js';
import type { LmdbStorage } from './lmdb.js';
import { entriesInPages } from './lmdb-pages.js';
import { SessionTurnCache, type SessionVersion } from './session-turn-cache.js';
import type { ExportedSession, RecordTransfer, SessionMessage, SessionRecord, SessionStore, SessionSummary } from './types.js';

/**
 * created, updated, the first kept and the next turn sequence numbers, and the tag drawn at
 * creation; `stored`, when below `first`, is the oldest turn still in storage (dropped, not yet removed).
 */
type SessionMeta = SessionVersion & { stored?: number };

/** Dropped turns are removed once this many wait: one range per batch instead of a remove or two per append. */
export const TRIM_BATCH = 32;

/** A random tag for a new session (sessions stored before tags existed have none). */
function newTag(): number {
  return Math.floor(Math.random() * 2 ** 48);
}

type MetaKey = [string, string];
type MessageKey = [string, string, number];

/** Sessions a listing reads at most before sorting by recency. */
const LIST_SCAN_LIMIT = 1000;
/**
 * Characters of decoded turns kept per process when the caller gives no size (about as many bytes
 * for ASCII text; the server gives `session_cache_mb`'s).
 */
export const SESSION_CACHE_CHARS = SESSION_CACHE_MB * 1024 * 1024;

/** The LMDB-backed session store; keeps at most `maxTurns` turns per session (oldest dropped first). */
export class LmdbSessionStore implements SessionStore, RecordTransfer<ExportedSession> {
  private readonly meta: Database<SessionMeta, MetaKey>;
  private readonly messages: Database<SessionMessage, MessageKey>;
  private readonly cache: SessionTurnCache;

  constructor(
    storage: LmdbStorage,
    private readonly maxTurns: number,
    cacheChars = SESSION_CACHE_CHARS,
  ) {
    this.meta = storage.database<SessionMeta, MetaKey>('sessions', { sharedStructures: true });
    this.messages = storage.database<SessionMessage, MessageKey>('session-messages', { sharedStructures: true });
    this.cache = new SessionTurnCache(cacheChars);
  }

  async get(owner: string, sessionId: string, limit = this.maxTurns): Promise<SessionRecord | undefined> {
    const key = SessionTurnCache.keyOf(owner, sessionId);
    const meta = this.meta.get([owner, sessionId]);
    if (!meta) {
      this.cache.drop(key);
      return undefined;
    }
    const start = Math.max(meta.first, meta.next - Math.max(0, limit));
    const record = { session_id: sessionId, created: meta.created, updated: meta.updated, message_count: meta.next - meta.first };
    if (start >= meta.next) return { ...record, messages: [] };
    const cached = this.cache.turns(key, meta, start);
    if (cached) return { ...record, messages: cached };
    // The meta and the range are read in one read transaction, so the turns belong to this meta.
    const read = this.range(owner, sessionId, start, meta.next);
    // Only a whole session is remembered: a shorter page (a listing's `limit`) is not the tail the chat reads.
    if (start === meta.first) this.cache.remember(key, meta, read.slice());
    return { ...record, messages: read };
  }

  private range(owner: string, sessionId: string, start: number, end: number): SessionMessage[] {
    const messages: SessionMessage[] = [];
    for (const { value } of this.messages.getRange({ start: [owner, sessionId, start], end: [owner, sessionId, end] })) {
      messages.push(value);
    }
    return messages;
  }

  async append(owner: string, sessionId: string, turns: SessionMessage[]): Promise<void> {
    if (turns.length === 0) return;
    // Turns beyond the cap would be trimmed at once; never write them.
    const kept = turns.length > this.maxTurns ? turns.slice(turns.length - this.maxTurns) : turns;
    const skipped = turns.length - kept.length;
    const now = isoTime();
    const written: SessionMessage[] = [];
    let before: SessionMeta | undefined;
    let after: SessionMeta | undefined;
    // One transaction: meta read, turns written, overflow trimmed, meta written. Concurrent appends
    // to one session therefore never share a sequence number or lose a turn.
    await this.meta.transaction(() => {
      const key: MetaKey = [owner, sessionId];
      const meta = this.meta.get(key);
      const current = meta ?? { created: now, updated: now, first: 0, next: 0, tag: newTag() };
      let next = current.next + skipped;
      written.length = 0;
      for (const turn of kept) {
        const stored: SessionMessage = { role: turn.role, content: turn.content, timestamp: turn.timestamp };
        if (turn.tool_calls) stored.tool_calls = turn.tool_calls;
        if (turn.tool_call_id !== undefined) stored.tool_call_id = turn.tool_call_id;
        if (turn.incomplete) stored.incomplete = true;
        this.messages.put([owner, sessionId, next], stored);
        written.push(stored);
        next += 1;
      }
      // Keep the newest maxTurns. Turns that fell below `first` are removed once TRIM_BATCH of them
      // wait (skipped ones were never written); until then `stored` remembers where they start.
      const first = Math.max(current.first, next - this.maxTurns);
      let stored = current.stored ?? current.first;
      if (first - stored >= TRIM_BATCH) {
        for (let seq = stored; seq < Math.min(first, current.next); seq += 1) this.messages.remove([owner, sessionId, seq]);
        stored = first;
      }
      before = meta;
      after = { created: current.created, updated: now, first, next };
      if (stored < first) after.stored = stored;
      if (current.tag !== undefined) after.tag = current.tag;
      this.meta.put(key, after);
    });
    // Committed: a cached copy of the state appended to follows along; any other is dropped.
    const cacheKey = SessionTurnCache.keyOf(owner, sessionId);
    if (before && after) this.cache.appended(cacheKey, before, after, written);
    else this.cache.drop(cacheKey);
  }

  async delete(owner: string, sessionId: string): Promise<boolean> {
    this.cache.drop(SessionTurnCache.keyOf(owner, sessionId));
    return this.meta.transaction(() => {
      const key: MetaKey = [owner, sessionId];
      const meta = this.meta.get(key);
      if (!meta) return false;
      for (let seq = meta.stored ?? meta.first; seq < meta.next; seq += 1) this.messages.remove([owner, sessionId, seq]);
      this.meta.remove(key);
      return true;
    });
  }

  async list(owner: string, limit: number): Promise<SessionSummary[]> {
    const summaries: SessionSummary[] = [];
    for (const { key, value } of this.meta.getRange({ start: [owner, ''], end: [owner, '\uffff'], limit: LIST_SCAN_LIMIT })) {
      summaries.push({ session_id: key[1], message_count: value.next - value.first, created: value.created, updated: value.updated });
    }
    summaries.sort((a, b) => (a.updated < b.updated ? 1 : a.updated > b.updated ? -1 : 0));
    return summaries.slice(0, limit);
  }

  /** Every owner's sessions in [owner, id] order, each with all its kept turns. */
  async *exportRecords(): AsyncGenerator<ExportedSession> {
    for await (const { key, value } of entriesInPages(this.meta)) {
      const [owner, sessionId] = key;
      const messages: SessionMessage[] = [];
      for (const turn of this.messages.getRange({ start: [owner, sessionId, value.first], end: [owner, sessionId, value.next] })) {
        messages.push(turn.value);
      }
      const { created, updated, first, next } = value;
      yield { owner, session_id: sessionId, created, updated, first, next, messages };
    }
  }

  /** Replaces the session with the exported one: the same meta, its turns numbered up to `next`. */
  async importRecord(session: ExportedSession): Promise<void> {
    const { owner, session_id: sessionId, next } = session;
    const first = next - session.messages.length;
    this.cache.drop(SessionTurnCache.keyOf(owner, sessionId));
    await this.meta.transaction(() => {
      const old = this.meta.get([owner, sessionId]);
      if (old) for (let seq = old.stored ?? old.first; seq < old.next; seq += 1) this.messages.remove([owner, sessionId, seq]);
      for (const [index, turn] of session.messages.entries()) this.messages.put([owner, sessionId, first + index], turn);
      this.meta.put([owner, sessionId], { created: session.created, updated: session.updated, first, next });
    });
  }
}
