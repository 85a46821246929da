/**
 * Walks the keys of one kind (`quota:…`, `key:…`) under a deployment's prefix with SCAN: bounded
 * batches, no KEYS, so a large Redis is read without blocking it. A key may come twice when the
 * keyspace is rehashed during the walk; callers write records by identity, so that is harmless.
 */
import type { RedisStorage } from './redis.js';

/** Keys asked for per SCAN call (a hint to Redis, not a limit). */
const SCAN_COUNT = 500;

/** `text` with the glob characters of a MATCH pattern escaped. */
function globEscaped(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** The names (without the prefix) of every key named `${kind}…`, in batches. */
export async function* scanNames(storage: RedisStorage, kind: string): AsyncGenerator<string[]> {
  const match = `${globEscaped(storage.key(kind))}*`;
  let cursor = '0';
  do {
    const reply = await storage.call((client) => client.scan(cursor, { MATCH: match, COUNT: SCAN_COUNT }));
    cursor = String(reply.cursor);
    const names = reply.keys.map((key) => String(key).slice(storage.prefix.length));
    if (names.length > 0) yield names;
  } while (cursor !== '0');
}
