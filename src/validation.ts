/**
 * The one mapper from valibot issues to sentences a person understands, shared by the routes
 * (400 `invalid_request` details) and the config loader (start-up errors). Raw library wording
 * ("Invalid key: Expected …") never reaches a user: each issue becomes a field path and what that
 * field accepts.
 */
import * as v from 'valibot';
import { ApiError, type ErrorDetail } from './errors.js';

type Issue = v.BaseIssue<unknown>;

/** The dotted path of the field an issue is about (`rag.top_k`), or `fallback` at the root. */
function issuePath(issue: Issue, fallback = '(body)'): string {
  return (issue.path ?? []).map((item) => String(item.key)).join('.') || fallback;
}

const TYPE_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  strict_object: 'an object',
  loose_object: 'an object',
  record: 'an object',
  integer: 'an integer',
  url: 'a URL',
};

/** One issue as a sentence about its field (without the path). */
export function issueSentence(issue: Issue): string {
  const isObject = issue.type === 'object' || issue.type === 'strict_object' || issue.type === 'loose_object';
  if (issue.kind === 'schema' && isObject && (issue.path?.length ?? 0) === 0) return 'must be a JSON object';
  if (issue.kind === 'schema' && isObject && issue.received === 'undefined') return 'is required';
  if (issue.kind === 'schema' && issue.type === 'strict_object' && issue.expected === 'never') return 'is not a known field';
  // Messages written in our schemas ("must be at most 20") are already sentences.
  if (!issue.message.startsWith('Invalid ')) return issue.message;
  if (issue.type === 'picklist' || issue.type === 'literal' || issue.type === 'enum') {
    return `must be one of ${issue.expected ?? 'the documented values'}`;
  }
  if (issue.type === 'min_value') return `must be at least ${issue.requirement as number}`;
  if (issue.type === 'max_value') return `must be at most ${issue.requirement as number}`;
  if (issue.type === 'min_length') return `must have at least ${issue.requirement as number} characters or items`;
  if (issue.type === 'max_length') return `must have at most ${issue.requirement as number} characters or items`;
  if (issue.type === 'regex') return 'has characters or a form that is not allowed';
  const wanted = TYPE_WORDS[issue.type];
  if (wanted) return `must be ${wanted}`;
  return 'is not valid here';
}

/** Every issue as `{path, message}`, required fields named before the rest, one line per field. */
export function issueDetails(issues: readonly Issue[], rootName = '(body)'): ErrorDetail[] {
  const seen = new Set<string>();
  const details: ErrorDetail[] = [];
  for (const issue of issues) {
    const detail = { path: issuePath(issue, rootName), message: issueSentence(issue) };
    const key = `${detail.path}\n${detail.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    details.push(detail);
  }
  return details;
}

/** Validates `value` against `schema`; throws `invalid_request` with one detail per failing field. */
export function parseOrThrow<const S extends v.GenericSchema>(
  schema: S,
  value: unknown,
  message = 'The request is not valid.',
): v.InferOutput<S> {
  const result = v.safeParse(schema, value, { abortEarly: false });
  if (result.success) return result.output;
  throw new ApiError('invalid_request', message, { details: issueDetails(result.issues) });
}
