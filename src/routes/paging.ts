/**
 * Keyset paging for admin listings (users, knowledge-base documents): `?limit=` (1-1000, default
 * 100) and `?after=<id>` in, and `next_after` out when the page came back full, so a client pages
 * until a reply has no `next_after`.
 */
import { queryInt } from '../auth/validation.js';
import { ApiError } from '../errors.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

/**
 * The `limit` and `after` of a listing request, validated: `after` must look like an id of the
 * listing (`idPattern`), since it becomes part of a storage key (invalid_request otherwise).
 */
export function pageQuery(query: URLSearchParams, idPattern: RegExp): { limit: number; after: string | undefined } {
  const limit = queryInt(query, 'limit', DEFAULT_LIMIT, 1, MAX_LIMIT);
  const after = query.get('after') ?? undefined;
  if (after !== undefined && !idPattern.test(after)) {
    throw new ApiError('invalid_request', 'The request is not valid.', {
      details: [{ path: 'after', message: 'must be an id from this listing' }],
    });
  }
  return { limit, after };
}

/** A path parameter that becomes part of a storage key: checked against its pattern, or 400 naming it. */
export function idParam(value: string | undefined, name: string, pattern: RegExp, accepts: string): string {
  if (value === undefined || !pattern.test(value)) {
    throw new ApiError('invalid_request', 'The request is not valid.', { details: [{ path: name, message: `must be ${accepts}` }] });
  }
  return value;
}

/** `{next_after}` holding the last item's id when the page is full, else `{}` (the listing ended). */
export function nextAfter<T>(page: readonly T[], limit: number, idOf: (item: T) => string): { next_after?: string } {
  const last = page.at(-1);
  return page.length === limit && last !== undefined ? { next_after: idOf(last) } : {};
}
