/**
 * The decoded turns of recently used sessions, per process. A chat naming a session reads all its
 * kept turns (up to `session_max_turns`) on every request; decoding them again each time is most of
 * what the read costs. An entry is only ever used after the caller has read the session's meta
 * from storage and found it unchanged (same created, updated, first, next and tag), so another process
 * appending to or deleting the same session is noticed by the next read, never served stale.
 *
 * Eviction is least-recently-used, but a session read from storage (a miss) only displaces cached
 * ones when it is asked for more often than the one it would evict (frequencies from a small
 * count-min sketch that halves itself as it goes: TinyLFU admission). Plain LRU keeps nothing useful
 * when more sessions are in use than fit and they come back in turn: each miss evicts the session
 * asked for next, every read decodes a whole session, and the cache then costs more than none.
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

/** Counters per row of the sketch (a power of two) and rows (independent hashes) of FrequencySketch. */
const SKETCH_WIDTH = 1 << 14;
const SKETCH_ROWS = 4;
/** A counter's ceiling: enough to rank sessions, small enough that halving forgets old favourites soon. */
const SKETCH_MAX = 15;

/**
 * How often each key was asked for lately, approximately: a count-min sketch of SKETCH_ROWS rows,
 * every counter halved once SKETCH_WIDTH × 10 accesses were counted, so the counts follow what is
 * used now. It never undercounts; collisions only overcount, and rarely with 16k counters a row.
 */
export class FrequencySketch {
  private readonly counters = new Uint8Array(SKETCH_WIDTH * SKETCH_ROWS);
  private counted = 0;

  /** Counts one access to `key`. */
  add(key: string): void {
    const hash = hashOf(key);
    for (let row = 0; row < SKETCH_ROWS; row++) {
      const index = row * SKETCH_WIDTH + slot(hash, row);
      if (this.counters[index]! < SKETCH_MAX) this.counters[index]! += 1;
    }
    if (++this.counted >= SKETCH_WIDTH * 10) this.halve();
  }

  /** The accesses to `key` counted lately (an upper bound). */
  frequency(key: string): number {
    const hash = hashOf(key);
    let least = SKETCH_MAX;
    for (let row = 0; row < SKETCH_ROWS; row++) least = Math.min(least, this.counters[row * SKETCH_WIDTH + slot(hash, row)]!);
    return least;
  }

  private halve(): void {
    for (let index = 0; index < this.counters.length; index++) this.counters[index]! >>= 1;
    this.counted = 0;
  }
}

/** FNV-1a over the key's UTF-16 code units. */
function hashOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) hash = Math.imul(hash ^ key.charCodeAt(index), 0x01000193);
  return hash >>> 0;
}

/** The counter of `hash` in `row`: the hash remixed with a seed per row. */
function slot(hash: number, row: number): number {
  let mixed = Math.imul(hash ^ Math.imul(row + 1, 0x9e3779b9), 0x85ebca6b);
  mixed ^= mixed >>> 13;
  mixed = Math.imul(mixed, 0xc2b2ae35);
  mixed ^= mixed >>> 16;
  return mixed & (SKETCH_WIDTH - 1);
}

/** A least-recently-used map of session turns, bounded by the characters it holds, with frequency-based admission. */
export class SessionTurnCache {
  private readonly entries = new Map<string, Entry>();
  private readonly sketch = new FrequencySketch();
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
    this.sketch.add(key);
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

  /**
   * Remembers the turns stored at `version` (all of first..next-1; the cache keeps the array given),
   * unless making room would evict a session asked for at least as often as this one.
   */
  remember(key: string, version: SessionVersion, messages: SessionMessage[]): void {
    this.drop(key);
    const { created, updated, first, next, tag } = version;
    const entry: Entry = { created, updated, first, next, tag, messages, chars: charsOf(messages) };
    if (this.chars + entry.chars > this.maxChars && !this.admits(key)) return;
    this.insert(key, entry);
  }

  /** Whether `key` is asked for more often than the least recently used entry, which room for it would evict first. */
  private admits(key: string): boolean {
    const victim = this.entries.keys().next();
    return victim.done === true || this.sketch.frequency(key) > this.sketch.frequency(victim.value);
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
