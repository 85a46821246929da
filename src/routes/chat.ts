/**
 * POST /api/chat/ (JSON), /api/chat/stream (SSE), /api/chat/progress (NDJSON) and
 * /api/chat/search (JSON, or SSE with Accept: text/event-stream): one admission step, one core
 * pipeline, and an encoder per route.
 */
import type { ChatKind } from '../core/chat-job.js';
import { ChatPipeline } from '../core/chat-pipeline.js';
import { wantsSearch } from '../core/sources.js';
import type { ChatEvent } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Services } from '../services.js';
import { admitChat, type AdmittedChat } from './admit.js';
import { ChatResultCollector, NdjsonEncoder, SseEncoder } from './chat-encoders.js';
import { ChatObserver } from './chat-metrics.js';
import { rateLimitHeaders } from './headers.js';

const SSE_HEARTBEAT = { intervalMs: 15_000, frame: ': ping\n\n' };

/** The error event's refunded quota, when the pipeline gave it back, as headers; otherwise the admitted ones. */
function errorHeaders(admitted: AdmittedChat, event: Extract<ChatEvent, { type: 'error' }>): Record<string, string> {
  return event.quota ? rateLimitHeaders(event.quota) : admitted.headers;
}

/** The chat route group over one pipeline. */
export function chatRoutes(services: Services, registry: ProviderRegistry): Route[] {
  const pipeline = new ChatPipeline({
    sessions: services.sessions,
    retriever: services.knowledge,
    search: services.search,
    logger: services.logger,
    sessionMaxTurns: services.config.sessionMaxTurns,
  });
  const observed = (admitted: AdmittedChat, signal: AbortSignal) => ({
    events: pipeline.run(admitted.job, signal),
    observer: new ChatObserver(services.metrics, admitted.job.provider.name, admitted.acceptedAt),
  });

  /** Collects the whole reply and answers with one JSON body (or the error that ended it). */
  const replyJson = async (context: HttpContext, admitted: AdmittedChat): Promise<void> => {
    const collector = new ChatResultCollector();
    const { events, observer } = observed(admitted, context.signal);
    for await (const event of events) {
      observer.see(event);
      collector.add(event);
      if (event.type === 'error') {
        if (context.signal.aborted) return;
        throw new ApiError(event.code, event.message, { headers: errorHeaders(admitted, event) });
      }
    }
    if (context.signal.aborted) return;
    const body = collector.body();
    if (!body) throw new ApiError('internal', 'The reply ended without finishing.', { headers: admitted.headers });
    context.json(200, body, admitted.headers);
  };

  /** Streams encoded frames with backpressure; stops the pipeline as soon as the client is gone. */
  const replyStream = async (
    context: HttpContext,
    admitted: AdmittedChat,
    events: AsyncIterable<ChatEvent>,
    observer: ChatObserver,
    options: { contentType: string; heartbeat?: typeof SSE_HEARTBEAT },
    encode: (event: ChatEvent) => string | undefined,
  ): Promise<void> => {
    const stream = context.stream({
      contentType: options.contentType,
      headers: { ...admitted.headers, 'X-Accel-Buffering': 'no' },
      ...(options.heartbeat ? { heartbeat: options.heartbeat } : {}),
    });
    services.metrics.activeStreams.inc();
    try {
      for await (const event of events) {
        observer.see(event);
        const frame = encode(event);
        // write() resolves once the client can take more, or false when it left: then breaking out
        // returns the generator, which closes the upstream request at once.
        if (frame !== undefined && !(await stream.write(frame))) break;
      }
    } finally {
      services.metrics.activeStreams.dec();
      stream.end();
    }
  };

  const sse = async (context: HttpContext, admitted: AdmittedChat): Promise<void> => {
    const encoder = new SseEncoder();
    const { events, observer } = observed(admitted, context.signal);
    let source: AsyncIterable<ChatEvent> = events;
    if (wantsSearch(admitted.job)) {
      source = await holdUntilSources(events, admitted);
      if (context.signal.aborted) return;
    }
    await replyStream(context, admitted, source, observer, { contentType: 'text/event-stream; charset=utf-8', heartbeat: SSE_HEARTBEAT }, (event) =>
      encoder.encode(event),
    );
  };

  const ndjson = async (context: HttpContext, admitted: AdmittedChat): Promise<void> => {
    const encoder = new NdjsonEncoder(admitted.acceptedAt);
    const { events, observer } = observed(admitted, context.signal);
    await replyStream(context, admitted, events, observer, { contentType: 'application/x-ndjson; charset=utf-8' }, (event) => encoder.encode(event));
  };

  const admit = (context: HttpContext, kind: ChatKind) => admitChat(services, registry, context, kind);
  return [
    { method: 'POST', path: '/api/chat', handler: async (context) => replyJson(context, await admit(context, 'chat')) },
    { method: 'POST', path: '/api/chat/stream', handler: async (context) => sse(context, await admit(context, 'chat')) },
    { method: 'POST', path: '/api/chat/progress', handler: async (context) => ndjson(context, await admit(context, 'chat')) },
    {
      method: 'POST',
      path: '/api/chat/search',
      handler: async (context) => {
        const admitted = await admit(context, 'search');
        if (wantsEventStream(context)) return sse(context, admitted);
        return replyJson(context, admitted);
      },
    },
  ];
}

/**
 * Reads the events up to `sources` before the stream opens, so a failed search is still an
 * ordinary JSON error (502 upstream_error / 504 upstream_timeout, quota given back) instead of an
 * `error` event on a 200 stream. The held events are replayed first.
 */
async function holdUntilSources(events: AsyncGenerator<ChatEvent>, admitted: AdmittedChat): Promise<AsyncGenerator<ChatEvent>> {
  const held: ChatEvent[] = [];
  for (;;) {
    const next = await events.next();
    if (next.done) break;
    if (next.value.type === 'error') {
      await events.return(undefined);
      throw new ApiError(next.value.code, next.value.message, { headers: errorHeaders(admitted, next.value) });
    }
    held.push(next.value);
    if (next.value.type === 'sources') break;
  }
  return (async function* () {
    try {
      yield* held;
      yield* events;
    } finally {
      // The client may leave while held events are replayed; the pipeline must still close.
      await events.return(undefined);
    }
  })();
}

function wantsEventStream(context: HttpContext): boolean {
  return (context.request.headers.accept ?? '').toLowerCase().includes('text/event-stream');
}
