/**
 * Errors in OpenAI's shape for the /v1 surface: `{"error": {message, type, param, code}}`, with
 * our stable codes in `code` and the statuses of the one catalogue (docs/errors.md maps them).
 */
import type { ApiError, ErrorCode } from '../errors.js';

/** OpenAI's `type` for each of our codes. */
const OPENAI_TYPES: Record<ErrorCode, string> = {
  invalid_json: 'invalid_request_error',
  invalid_request: 'invalid_request_error',
  unauthorized: 'authentication_error',
  forbidden: 'permission_error',
  not_found: 'not_found_error',
  stream_expired: 'invalid_request_error',
  method_not_allowed: 'invalid_request_error',
  conflict: 'invalid_request_error',
  payload_too_large: 'invalid_request_error',
  unsupported_media_type: 'invalid_request_error',
  unprocessable_document: 'invalid_request_error',
  quota_exceeded: 'insufficient_quota',
  concurrency_limit: 'rate_limit_error',
  internal: 'server_error',
  upstream_error: 'upstream_error',
  unavailable: 'server_error',
  overloaded: 'server_error',
  upstream_timeout: 'timeout_error',
};

/** The OpenAI error body for a code and message; `param` names the first failing field, if any. */
export function openAiError(code: ErrorCode, message: string, param: string | null = null): { error: Record<string, unknown> } {
  return { error: { message, type: OPENAI_TYPES[code], param, code } };
}

/** The OpenAI error body of an ApiError (its field details are kept beside the four standard fields). */
export function openAiErrorBody(error: ApiError): { error: Record<string, unknown> } {
  // OpenAI clients show only `message`: it names the failing fields itself.
  const fields = error.details?.map((detail) => `${detail.path} ${detail.message}`).join('; ');
  const message = fields ? `${error.message} ${fields}.` : error.message;
  const body = openAiError(error.code, message, error.details?.[0]?.path ?? null);
  if (error.details && error.details.length > 0) body.error.details = error.details;
  return body;
}

/** True for paths of the OpenAI-compatible surface. */
export function isV1Path(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}
