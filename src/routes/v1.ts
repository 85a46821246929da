/**
 * The OpenAI-compatible surface: POST /v1/chat/completions (JSON or `stream: true`), GET
 * /v1/models, GET /v1/models/{id} and POST /v1/embeddings. The same keys, plans, quota and
 * pipeline as /api; only the request parser and the encoders speak OpenAI's wire format.
 */
import * as v from 'valibot';
import type { ModelConfig } from '../config/index.js';
import { ApiError, toApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ChatProvider } from '../providers/types.js';
import { createEmbedder } from '../rag/create.js';
import type { Services } from '../services.js';
import { parseOrThrow } from '../validation.js';
import { admitChat, type ChatInput, identify, reserveQuota, takeSlots } from './admit.js';
import { type ChatReplies, holdsSearch } from './chat-replies.js';
import { rateLimitHeaders } from './headers.js';
import { ChunkEncoder, CompletionCollector, DONE_FRAME } from './v1-encoders.js';
import { type ParsedCompletion, parseCompletionRequest } from './v1-request.js';

/** Keep-alives are SSE comments: the SDK turns any named event into a chunk. */
const KEEP_ALIVE = { intervalMs: 15_000, frame: ': ping\n\n' };
/** A quota that resets later than this is not worth the SDK's automatic retries. */
const RETRY_WORTHWHILE_S = 60;

/**
 * The OpenAI SDK retries a 429 twice at once unless told not to: a quota refusal that lasts longer
 * than a minute says `x-should-retry: false` (Retry-After still says when it resets).
 */
function withRetryHint(error: unknown): unknown {
  if (!(error instanceof ApiError) || error.code !== 'quota_exceeded') return error;
  if (!(Number(error.headers['Retry-After']) > RETRY_WORTHWHILE_S)) return error;
  return new ApiError(error.code, error.message, {
    ...(error.details ? { details: error.details } : {}),
    headers: { ...error.headers, 'x-should-retry': 'false' },
  });
}

/** Refuses image parts the resolved model cannot take, before any quota is spent. */
function checkImages(parsed: ParsedCompletion, model: ModelConfig, provider: ChatProvider): void {
  if (parsed.images.length === 0) return;
  if (!model.vision) {
    throw new ApiError(
      'invalid_request',
      `The model "${model.id}" does not take image input; image_url parts need a model with "vision": true.`,
      {
        details: [{ path: 'messages', message: `image_url parts are not accepted by "${model.id}"` }],
      },
    );
  }
  if (provider.remoteImages === false && parsed.images.some((image) => !image.url.startsWith('data:'))) {
    throw new ApiError(
      'invalid_request',
      `The model "${model.id}" (${provider.name}) takes images only as data: URLs (base64), not as links.`,
      {
        details: [{ path: 'messages', message: 'image_url.url must be a data: URL for this model' }],
      },
    );
  }
}

export const EmbeddingsSchema = v.object({
  input: v.union(
    [
      v.string(),
      v.pipe(v.array(v.string()), v.minLength(1, 'must have at least one item'), v.maxLength(2048, 'must have at most 2048 items')),
    ],
    'must be a string or an array of strings (token arrays are not supported)',
  ),
  model: v.nullish(v.string('must be a string')),
  encoding_format: v.nullish(v.picklist(['float', 'base64'])),
  dimensions: v.nullish(v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1'))),
  user: v.nullish(v.string('must be a string')),
});

/** A vector as OpenAI's base64 encoding: little-endian float32. */
function base64Vector(vector: readonly number[]): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let index = 0; index < vector.length; index += 1) bytes.writeFloatLE(vector[index] ?? 0, index * 4);
  return bytes.toString('base64');
}

/** The /v1 route group over the shared replies. */
export function v1Routes(services: Services, registry: ProviderRegistry, replies: ChatReplies): Route[] {
  const maxBodyBytes = services.config.v1BodyLimitBytes;
  const created = Math.floor(Date.now() / 1000);
  const embedder = createEmbedder(services.config, { logger: services.logger, metrics: services.metrics });

  const modelEntry = (model: ModelConfig) => ({
    id: model.id,
    object: 'model',
    created,
    owned_by: model.provider === 'builtin' ? 'colloquy' : model.provider,
  });

  const completions = async (context: HttpContext): Promise<void> => {
    let parsed: ParsedCompletion | undefined;
    const parse = (body: unknown): ChatInput => {
      const completion = parseCompletionRequest(body);
      parsed = completion;
      return {
        request: completion.request,
        given: completion.given,
        options: completion.options,
        alwaysShowReasoning: true,
        stream: completion.stream,
        checkModel: (model, provider) => checkImages(completion, model, provider),
      };
    };
    let admitted: Awaited<ReturnType<typeof admitChat>>;
    try {
      admitted = await admitChat(services, registry, context, 'chat', { stream: false, parse });
    } catch (error) {
      throw withRetryHint(error);
    }
    try {
      if (parsed?.stream) {
        const encoder = new ChunkEncoder(parsed.includeUsage);
        await replies.stream(
          context,
          admitted,
          {
            contentType: 'text/event-stream; charset=utf-8',
            heartbeat: KEEP_ALIVE,
            encode: (event) => encoder.encode(event),
            trailer: DONE_FRAME,
          },
          { untilSources: holdsSearch(admitted) },
        );
      } else {
        await replies.json(context, admitted, new CompletionCollector());
      }
    } finally {
      admitted.release();
    }
  };

  const embeddings = async (context: HttpContext): Promise<void> => {
    const caller = await identify(services, context);
    if (!embedder) {
      throw new ApiError(
        'not_found',
        'No embeddings upstream is configured; set rag.embeddings ({"base_url", "model"}) in the config file.',
      );
    }
    const release = takeSlots(services, caller, false);
    try {
      const body = parseOrThrow(EmbeddingsSchema, await context.readJson(), 'The embeddings request is not valid.');
      const inputs = typeof body.input === 'string' ? [body.input] : body.input;
      let reservation: Awaited<ReturnType<typeof reserveQuota>>;
      try {
        reservation = await reserveQuota(services, caller, 'embeddings');
      } catch (error) {
        throw withRetryHint(error);
      }
      let result: Awaited<ReturnType<typeof embedder.embedRaw>>;
      try {
        result = await embedder.embedRaw(inputs, body.dimensions != null ? { dimensions: body.dimensions } : {}, context.signal);
      } catch (error) {
        const stamp = await reservation.refund();
        services.usage.record({
          caller,
          route: context.request.route,
          model: embedder.model,
          inputTokens: 0,
          outputTokens: 0,
          status: toApiError(error).status,
        });
        if (error instanceof ApiError) throw new ApiError(error.code, error.message, { headers: rateLimitHeaders(stamp) });
        throw error;
      }
      await reservation.durable;
      const base64 = body.encoding_format === 'base64';
      const promptTokens = result.promptTokens ?? inputs.reduce((sum, text) => sum + Math.ceil(text.length / 4), 0);
      services.usage.record({
        caller,
        route: context.request.route,
        model: embedder.model,
        inputTokens: promptTokens,
        outputTokens: 0,
        status: 200,
      });
      context.json(
        200,
        {
          object: 'list',
          data: result.vectors.map((vector, index) => ({ object: 'embedding', index, embedding: base64 ? base64Vector(vector) : vector })),
          model: embedder.model,
          usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
        },
        rateLimitHeaders(reservation.stamp),
      );
    } finally {
      release();
    }
  };

  return [
    { method: 'POST', path: '/v1/chat/completions', handler: completions, maxBodyBytes },
    { method: 'POST', path: '/v1/embeddings', handler: embeddings, maxBodyBytes },
    {
      method: 'GET',
      path: '/v1/models',
      handler: async (context) => {
        await identify(services, context);
        context.json(200, { object: 'list', data: registry.models.map(modelEntry) });
      },
    },
    {
      method: 'GET',
      path: '/v1/models/:id',
      handler: async (context) => {
        await identify(services, context);
        const id = context.request.params.id ?? '';
        const model = registry.models.find((known) => known.id === id);
        if (!model) throw new ApiError('not_found', `The model "${id}" does not exist; GET /v1/models lists the available ones.`);
        context.json(200, modelEntry(model));
      },
    },
  ];
}
