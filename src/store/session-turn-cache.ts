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
  /** The turns first..next-1, oldest first; shared with readers, so never mutated in place. */
  messages: readonly SessionMessage[];
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

  /** The turns stored at `version`, or undefined when the entry is missing or describes another state. */
  turns(key: string, version: SessionVersion): readonly SessionMessage[] | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (!sameVersion(entry, version)) {
      this.drop(key);
      return undefined;
    }
    // Most recently used last: re-insert.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.messages;
  }

  /** Remembers the turns stored at `version` (all of first..next-1). */
  remember(key: string, version: SessionVersion, messages: readonly SessionMessage[]): void {
    this.drop(key);
    const chars = charsOf(messages);
    if (chars > this.maxChars) return;
    const { created, updated, first, next, tag } = version;
    this.entries.set(key, { created, updated, first, next, tag, messages, chars });
    this.chars += chars;
    for (const [oldest, entry] of this.entries) {
      if (this.chars <= this.maxChars) break;
      this.entries.delete(oldest);
      this.chars -= entry.chars;
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
    const stored = added.slice(Math.max(0, added.length - (after.next - before.next)));
    const kept = [...entry.messages.slice(Math.max(0, after.first - before.first)), ...stored];
    this.remember(key, after, kept.slice(Math.max(0, kept.length - (after.next - after.first))));
  }

  /** Forgets a session (deleted or replaced). */
  drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.chars -= entry.chars;
  }
}
