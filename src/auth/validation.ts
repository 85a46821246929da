/** Request validation shared by the identity routes: valibot at the edge, issues → invalid_request details. */
import * as v from 'valibot';
import { ApiError } from '../errors.js';
import { issueSentence, parseOrThrow } from '../validation.js';

/** User ids: short, URL-safe, no colon (anonymous callers are `anon:<address>`), never `me` or `admin`. */
export const USER_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
const RESERVED_USER_IDS = new Set(['me', 'admin']);

export const UserIdSchema = v.pipe(
  v.string(),
  v.regex(USER_ID_PATTERN, 'must be 1-64 characters of A-Z, a-z, 0-9, "_", "." or "-"'),
  v.check((value) => !RESERVED_USER_IDS.has(value.toLowerCase()), 'is reserved ("me" and "admin" cannot be user ids)'),
);

export const KeyNameSchema = v.pipe(
  v.string(),
  v.trim(),
  v.minLength(1, 'must not be empty'),
  v.maxLength(64, 'must be at most 64 characters'),
);

/** Validates `value`, throwing `invalid_request` with one detail per failing field. */
export function parseWith<const S extends v.GenericSchema>(schema: S, value: unknown): v.InferOutput<S> {
  return parseOrThrow(schema, value);
}

/** Reason a user id is refused, or undefined when it is acceptable (for the CLI). */
export function userIdProblem(value: string): string | undefined {
  const result = v.safeParse(UserIdSchema, value);
  const issue = result.issues?.[0];
  return issue === undefined ? undefined : `user id ${issueSentence(issue)}`;
}

/** An integer query parameter within [min, max]; the fallback when absent. */
export function queryInt(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const text = query.get(name);
  if (text === null || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ApiError('invalid_request', 'The request is not valid.', {
      details: [{ path: name, message: `must be an integer from ${min} to ${max}` }],
    });
  }
  return value;
}
