/**
 * Keyset paging for admin listings (users, knowledge-base documents): `?limit=` (1-1000, default
 * 100) and `?after=<id>` in, and `next_after` out when the page came back full, so a client pages
 * until a reply has no `next_after`.
 */
import { queryInt } from '../auth/validation.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

/** The `limit` and `after` of a listing request, validated (invalid_request on a bad limit). */
export function pageQuery(query: URLSearchParams): { limit: number; after: string | undefined } {
  const limit = queryInt(query, 'limit', DEFAULT_LIMIT, 1, MAX_LIMIT);
  return { limit, after: query.get('after') ?? undefined };
}

/** `{next_after}` holding the last item's id when the page is full, else `{}` (the listing ended). */
export function nextAfter<T>(page: readonly T[], limit: number, idOf: (item: T) => string): { next_after?: string } {
  const last = page.at(-1);
  return page.length === limit && last !== undefined ? { next_after: idOf(last) } : {};
}
