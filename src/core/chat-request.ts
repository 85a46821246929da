/**
 * The chat request as the contract fixes it, validated once at the edge with valibot. Unknown
 * fields are refused; every failing field is listed in `details` with its path.
 */
import * as v from 'valibot';
import { SESSION_ID_PATTERN } from '../domain/types.js';
import { COLLECTION_PATTERN } from '../rag/index-store.js';
import { ApiError } from '../errors.js';
import { parseOrThrow } from '../validation.js';

const MESSAGE_MAX = 32_768;

const Bcp47 = v.pipe(
  v.string(),
  v.check((tag) => {
    // Intl knows BCP 47 syntax; it refuses malformed tags such as "english" or "en_US".
    try {
      return /^[A-Za-z]{2,3}([-][A-Za-z0-9]{1,8})*$/.test(tag) && Intl.getCanonicalLocales(tag).length === 1;
    } catch {
      return false;
    }
  }, 'must be a BCP 47 language tag such as "en" or "fr-CA"'),
);

const Int = (min: number, max: number) =>
  v.pipe(
    v.number(),
    v.integer('must be an integer'),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

/** The /api chat fields; the /v1 surface reuses the extension ones (session_id, rag, web_search, language). */
export const chatFields = {
  message: v.pipe(
    v.string('must be a string'),
    v.trim(),
    v.minLength(1, 'must not be empty'),
    v.maxLength(MESSAGE_MAX, `must be at most ${MESSAGE_MAX} characters`),
  ),
  model: v.optional(v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'))),
  history: v.optional(
    v.pipe(
      v.array(
        v.strictObject({
          role: v.picklist(['system', 'user', 'assistant'], 'must be "system", "user" or "assistant"'),
          content: v.string('must be a string'),
        }),
        'must be an array of {role, content}',
      ),
      v.maxLength(100, 'must have at most 100 items'),
    ),
  ),
  session_id: v.optional(
    v.pipe(v.string('must be a string'), v.regex(SESSION_ID_PATTERN, 'must be 1-128 characters of A-Z, a-z, 0-9, "_" or "-"')),
  ),
  rag: v.optional(
    v.union(
      [
        v.boolean(),
        v.strictObject({
          top_k: v.optional(Int(1, 20)),
          collection: v.optional(
            v.pipe(v.string('must be a string'), v.regex(COLLECTION_PATTERN, 'must be 1-64 characters of A-Z, a-z, 0-9, "_" or "-"')),
          ),
        }),
      ],
      'must be a boolean or {top_k?, collection?}',
    ),
  ),
  web_search: v.optional(
    v.union([v.boolean(), v.strictObject({ max_results: v.optional(Int(1, 10)) })], 'must be a boolean or {max_results?}'),
  ),
  deep_thinking: v.optional(v.boolean('must be a boolean')),
  language: v.optional(Bcp47),
  temperature: v.optional(v.pipe(v.number('must be a number'), v.minValue(0, 'must be at least 0'), v.maxValue(2, 'must be at most 2'))),
  max_tokens: v.optional(Int(1, 32_768)),
  system: v.optional(v.string('must be a string')),
  /** Keep the stream's events so a dropped client can resume it (streamed routes only). */
  resumable: v.optional(v.boolean('must be a boolean')),
};

/** POST /api/chat/, /stream and /progress. */
export const ChatRequestSchema = v.strictObject(chatFields, 'unknown field');
/** POST /api/chat/search: the chat request plus `max_results`. */
export const SearchChatRequestSchema = v.strictObject({ ...chatFields, max_results: v.optional(Int(1, 10)) }, 'unknown field');

/** A validated chat request (search fields included). */
export type ChatRequest = v.InferOutput<typeof SearchChatRequestSchema>;

/** The characters of the prompt a request sends (its messages as given); a token estimate divides them by four. */
export function promptChars(request: ChatRequest, given: { messages: ReadonlyArray<{ content: string }> } | undefined): number {
  if (given) return given.messages.reduce((sum, message) => sum + message.content.length, 0);
  let chars = request.message.length + (request.system?.length ?? 0);
  for (const turn of request.history ?? []) chars += turn.content.length;
  return chars;
}

/** Validates a parsed body; throws invalid_request with one detail per failing field. */
export function parseChatRequest(body: unknown, withSearch: boolean): ChatRequest {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError('invalid_request', 'The body must be a JSON object.', {
      details: [{ path: '(body)', message: 'must be an object' }],
    });
  }
  return parseOrThrow(withSearch ? SearchChatRequestSchema : ChatRequestSchema, body, 'The chat request is not valid.');
}
