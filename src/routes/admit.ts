/**
 * The admission step at the edge, shared by chat, search and images: an HTTP request becomes a
 * caller, a validated request and a quota decision. Everything that can refuse a request with a
 * plain JSON error happens here, before any upstream work; quota is taken last, after everything
 * that could refuse the request for free.
 */
import type { Credentials } from '../auth/types.js';
import type { ChatJob, ChatKind } from '../core/chat-job.js';
import { type ChatRequest, parseChatRequest, promptChars } from '../core/chat-request.js';
import { estimateTokensFromChars } from '../providers/builtin.js';
import type { ModelConfig } from '../config/index.js';
import type { ChatProvider } from '../providers/types.js';
import type { Caller, Operation, QuotaReservation } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { HttpContext } from '../http/types.js';
import { parseImageRequest } from '../images/request.js';
import type { ImageRequest } from '../images/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Release } from '../quota/parallel.js';
import { QuotaExceeded } from '../quota/service.js';
import type { Services } from '../services.js';
import { rateLimitHeaders } from './headers.js';

/** What authentication reads of a request. */
function credentials(context: HttpContext): Credentials {
  const { request } = context;
  return {
    authorization: request.headers.authorization,
    // Read only when the caller turns out anonymous: the peer's address costs a system call.
    get clientAddress() {
      return request.clientAddress;
    },
  };
}

/** The caller of a request (API key, admin token, or anonymous by address). */
export function identify(services: Services, context: HttpContext): Promise<Caller> {
  // A request's reads start here: they see what was written before it came, through any process.
  services.storage.freshen();
  return services.auth.caller(credentials(context));
}

/** The admin caller; refuses everyone else (404 when the admin API is disabled). */
export function requireAdmin(services: Services, context: HttpContext): Promise<Caller> {
  services.storage.freshen();
  return services.auth.admin(credentials(context));
}

/** Takes the operation's cost; a refusal is a 429 with the RateLimit headers and Retry-After. */
export async function reserveQuota(
  services: Services,
  caller: Caller,
  operation: Operation,
  tokenEstimate?: number,
): Promise<QuotaReservation> {
  try {
    const reservation = await services.quota.reserve(caller, operation, tokenEstimate);
    services.metrics.quotaUnits.inc({ plan: reservation.stamp.plan }, services.config.costs[operation]);
    return reservation;
  } catch (error) {
    if (!(error instanceof QuotaExceeded)) throw error;
    services.metrics.quotaRefusals.inc({ plan: error.stamp.plan });
    throw new ApiError('quota_exceeded', error.message, {
      headers: { ...rateLimitHeaders(error.stamp), 'Retry-After': String(error.stamp.resetSeconds) },
    });
  }
}

/** Takes the caller's parallel slot (and a stream slot for streamed replies) or refuses: 429 / 503. */
export function takeSlots(services: Services, caller: Caller, stream: boolean): Release {
  const slot = services.parallel.acquire(caller);
  if (!slot) {
    throw new ApiError('concurrency_limit', 'Too many of your requests are running at once; wait for one to finish.', {
      headers: { 'Retry-After': '1' },
    });
  }
  return stream ? withStreamSlot(services, slot) : slot;
}

/** Adds a stream slot to `slot`, or gives `slot` back and refuses with 503 overloaded. */
function withStreamSlot(services: Services, slot: Release): Release {
  const streamSlot = services.streams.acquire();
  if (!streamSlot) {
    slot();
    throw new ApiError('overloaded', 'This server is serving as many streams as it can; retry shortly or use another node.', {
      headers: { 'Retry-After': '1' },
    });
  }
  return () => {
    streamSlot();
    slot();
  };
}

/** What a chat route's body becomes: the request for the shared stages and, on /v1, the rest of the job. */
export interface ChatInput extends Pick<ChatJob, 'given' | 'options' | 'alwaysShowReasoning'> {
  request: ChatRequest;
  /** The body asked for a stream (/v1's `stream: true`). */
  stream?: boolean;
  /** Refuses a model that cannot serve this input (image parts need `vision`); runs before any quota is taken. */
  checkModel?(model: ModelConfig, provider: ChatProvider): void;
}

/** An admitted chat request: the job for the core, when it was accepted, and its quota headers. */
export interface AdmittedChat {
  /** Gives the parallel (and stream) slots back: call it when the reply ended, however it ended. */
  release: Release;
  job: ChatJob;
  /** performance.now() when the request arrived (elapsed_ms and time to first token count from it). */
  acceptedAt: number;
  headers: Record<string, string>;
}

/** Caller, body, model, quota for the chat routes; each failure is an ordinary JSON error. */
export async function admitChat(
  services: Services,
  registry: ProviderRegistry,
  context: HttpContext,
  kind: ChatKind,
  options: { stream: boolean; parse?: (body: unknown) => ChatInput },
): Promise<AdmittedChat> {
  const acceptedAt = performance.now();
  const caller = await identify(services, context);
  // Slots before quota: a request refused for running too much at once costs nothing.
  let release = takeSlots(services, caller, options.stream);
  try {
    const body = await context.readJson();
    const input: ChatInput = options.parse ? options.parse(body) : { request: parseChatRequest(body, kind === 'search') };
    const { request } = input;
    if (request.resumable && !options.stream && !input.stream) {
      throw new ApiError('invalid_request', 'resumable applies to streamed replies (/api/chat/stream, /api/chat/progress, SSE search).', {
        details: [{ path: 'resumable', message: 'is only for streamed replies' }],
      });
    }
    // A body that asks for a stream takes its stream slot now that it is known.
    if (input.stream && !options.stream) release = withStreamSlot(services, release);
    const collection = typeof request.rag === 'object' ? request.rag.collection : undefined;
    if (collection !== undefined && !(await services.knowledge.hasCollection(collection))) {
      // Never a silent empty answer: asking a collection that does not exist is a mistake to name.
      throw new ApiError(
        'not_found',
        `The knowledge base has no collection "${collection}"; GET /api/rag/collections lists the collections there are.`,
      );
    }
    const { model, provider } = registry.resolve(request.model);
    input.checkModel?.(model, provider);
    // A token budget reserves the prompt and the answer's room before any upstream work.
    const tokenEstimate =
      estimateTokensFromChars(promptChars(request, input.given)) + (request.max_tokens ?? services.config.defaultMaxTokens);
    const reservation = await reserveQuota(services, caller, kind === 'search' ? 'search' : 'chat', tokenEstimate);
    const fallbacks = registry.fallbacksOf(model);
    // One object shape for every route's jobs (fields absent are undefined): the stages that read
    // them see one shape, not one per route.
    const { given } = input;
    const job: ChatJob = {
      kind,
      caller,
      request,
      model,
      provider,
      reservation,
      fallbacks: fallbacks.length > 0 ? fallbacks : undefined,
      given,
      options: given ? (input.options ?? {}) : undefined,
      alwaysShowReasoning: given ? (input.alwaysShowReasoning ?? false) : undefined,
    };
    return {
      release,
      job,
      acceptedAt,
      headers: rateLimitHeaders(reservation.stamp),
    };
  } catch (error) {
    release();
    throw error;
  }
}

/** An admitted image request. */
export interface AdmittedImage {
  /** Gives the parallel slot back when the reply ended. */
  release: Release;
  caller: Caller;
  request: ImageRequest;
  reservation: QuotaReservation;
}

/** Caller, body, quota for the image route. */
export async function admitImage(services: Services, context: HttpContext, options: { stream: boolean }): Promise<AdmittedImage> {
  const caller = await identify(services, context);
  const release = takeSlots(services, caller, options.stream);
  try {
    const request = parseImageRequest(await context.readJson(), services.images);
    const reservation = await reserveQuota(services, caller, 'image');
    return { release, caller, request, reservation };
  } catch (error) {
    release();
    throw error;
  }
}
