/**
 * Reads a whole LMDB sub-database in bounded pages: each page is one short range read, the next
 * starts after the last key seen, so no read transaction stays open while a caller awaits.
 */
import type { Database, Key } from 'lmdb';

/** Entries read per page. */
const PAGE = 500;

/** Every entry of `db` in key order, `PAGE` at a time. */
export async function* entriesInPages<V, K extends Key>(db: Database<V, K>): AsyncGenerator<{ key: K; value: V }> {
  let after: K | undefined;
  for (;;) {
    const range = after === undefined ? { limit: PAGE } : { start: after, exclusiveStart: true, limit: PAGE };
    const page = [...db.getRange(range)].map(({ key, value }) => ({ key, value }));
    yield* page;
    if (page.length < PAGE) return;
    after = page[page.length - 1]?.key;
  }
}
