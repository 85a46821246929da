/** The POST /api/chat/image body: validated once at the edge into a trusted ImageRequest. */
import * as v from 'valibot';
import { ApiError } from '../errors.js';
import { parseOrThrow } from '../validation.js';
import type { ImageProvider, ImageRequest } from './types.js';

const IMAGE_SIZES = ['256x256', '512x512', '1024x1024'] as const;
const MAX_PROMPT_CHARS = 4000;
const MAX_IMAGES = 4;

export const ImageBodySchema = v.strictObject({
  prompt: v.pipe(
    v.string('must be a string'),
    v.trim(),
    v.minLength(1, 'must not be empty'),
    v.maxLength(MAX_PROMPT_CHARS, `must be at most ${MAX_PROMPT_CHARS} characters`),
  ),
  size: v.optional(v.picklist(IMAGE_SIZES, `must be one of ${IMAGE_SIZES.join(', ')}`)),
  n: v.optional(
    v.pipe(
      v.number('must be a number'),
      v.integer('must be an integer'),
      v.minValue(1, `must be between 1 and ${MAX_IMAGES}`),
      v.maxValue(MAX_IMAGES, `must be between 1 and ${MAX_IMAGES}`),
    ),
  ),
  model: v.optional(v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'))),
});

/** Validates a parsed body against the contract and the configured provider's model id. */
export function parseImageRequest(body: unknown, provider: ImageProvider): ImageRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError('invalid_request', 'The image request is not valid.', {
      details: [{ path: '(body)', message: 'must be a JSON object' }],
    });
  }
  const { prompt, size = '1024x1024', n = 1, model } = parseOrThrow(ImageBodySchema, body, 'The image request is not valid.');
  if (model !== undefined && model !== provider.model) {
    throw new ApiError('invalid_request', 'The image request is not valid.', {
      details: [{ path: 'model', message: `is not an image model of this server (available: ${provider.model})` }],
    });
  }
  const [width, height] = size.split('x').map(Number) as [number, number];
  return { prompt, width, height, n };
}
