/**
 * The decoded turns of recently used sessions, per process. A chat naming a session reads all its
 * kept turns (up to `session_max_turns`) on every request; decoding them again each time is most of
 * what the read costs. An entry is only ever used after the caller has read the session's meta
 * from storage and found it unchanged (same created, updated, first, next and tag), so another process
 * appending to or deleting the same session is noticed by the next read, never served stale.
 */
import type { SessionMessage } from './types.js';

/** What identifies one stored state of a session: every append and every re-creation changes it. */
export interface SessionVersion {
  created: string;
  updated: string;
  /** Sequence number of the oldest kept turn. */
  first: number;
  /** Sequence number the next turn gets. */
  next: number;
  /** Drawn when the session is created: tells a session deleted and created again from the old one. */
  tag?: number;
}

interface Entry extends SessionVersion {
  /** The turns first..next-1, oldest first. Readers get copies (`turns` slices), so appends edit it in place. */
  messages: SessionMessage[];
  chars: number;
}

/** Characters counted for a turn beyond its content (role, timestamp, object overhead). */
const TURN_OVERHEAD_CHARS = 64;

function charsOf(messages: readonly SessionMessage[]): number {
  let chars = 0;
  for (const message of messages) chars += message.content.length + TURN_OVERHEAD_CHARS;
  return chars;
}

/** True when both describe the same stored state. */
export function sameVersion(a: SessionVersion, b: SessionVersion): boolean {
  return a.next === b.next && a.first === b.first && a.updated === b.updated && a.created === b.created && a.tag === b.tag;
}

/** A least-recently-used map of session turns, bounded by the characters it holds. */
export class SessionTurnCache {
  private readonly entries = new Map<string, Entry>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** The cache key of an owner's session (the owner's length keeps any two pairs apart). */
  static keyOf(owner: string, sessionId: string): string {
    return `${owner.length}:${owner}${sessionId}`;
  }

  /**
   * The turns from sequence number `start` on as stored at `version` (a new array), or undefined
   * when the entry is missing or describes another state.
   */
  turns(key: string, version: SessionVersion, start: number): SessionMessage[] | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (!sameVersion(entry, version)) {
      this.drop(key);
      return undefined;
    }
    // Most recently used last: re-insert.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.messages.slice(start - entry.first);
  }

  /** Remembers the turns stored at `version` (all of first..next-1; the cache keeps the array given). */
  remember(key: string, version: SessionVersion, messages: SessionMessage[]): void {
    this.drop(key);
    const { created, updated, first, next, tag } = version;
    this.insert(key, { created, updated, first, next, tag, messages, chars: charsOf(messages) });
  }

  private insert(key: string, entry: Entry): void {
    if (entry.chars > this.maxChars) return;
    this.entries.set(key, entry);
    this.chars += entry.chars;
    for (const [oldest, old] of this.entries) {
      if (this.chars <= this.maxChars) break;
      this.entries.delete(oldest);
      this.chars -= old.chars;
    }
  }

  /**
   * Moves an entry from `before` to `after` once an append committed: the appended turns are added
   * and those trimmed below `after.first` go. An entry that was not at `before` is dropped.
   */
  appended(key: string, before: SessionVersion, after: SessionVersion, added: readonly SessionMessage[]): void {
    const entry = this.entries.get(key);
    if (!entry || sameVersion(entry, after)) return;
    if (!sameVersion(entry, before)) {
      this.drop(key);
      return;
    }
    // Turns before.next..after.next-1 are the tail of `added` (skipped ones were never stored).
    const { messages } = entry;
    const stored = added.slice(Math.max(0, added.length - (after.next - before.next)));
    for (const message of stored) messages.push(message);
    const trimmed = messages.splice(0, Math.max(0, messages.length - (after.next - after.first)));
    this.drop(key);
    entry.chars += charsOf(stored) - charsOf(trimmed);
    entry.created = after.created;
    entry.updated = after.updated;
    entry.first = after.first;
    entry.next = after.next;
    entry.tag = after.tag;
    this.insert(key, entry);
  }

  /** Forgets a session (deleted or replaced). */
  drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.chars -= entry.chars;
  }
}
