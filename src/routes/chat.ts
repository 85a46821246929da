/**
 * POST /api/chat/ (JSON), /api/chat/stream (SSE), /api/chat/progress (NDJSON) and
 * /api/chat/search (JSON, or SSE with Accept: text/event-stream): one pipeline, four encoders.
 */
import { ChatPipeline, type ChatKind, type PreparedChat } from '../chat/pipeline.js';
import { ChatResultCollector, NdjsonEncoder, SseEncoder } from '../chat/encoders.js';
import type { ChatEvent } from '../chat/events.js';
import { ApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Services } from '../services.js';

const SSE_HEARTBEAT = { intervalMs: 15_000, frame: ': ping\n\n' };

/** Collects the whole reply and answers with one JSON body (or the error that ended it). */
async function replyJson(context: HttpContext, pipeline: ChatPipeline, prepared: PreparedChat): Promise<void> {
  const collector = new ChatResultCollector();
  for await (const event of pipeline.events(prepared, context.signal)) collector.add(event);
  if (context.signal.aborted) return;
  const body = collector.body();
  if (!body) {
    const failure = collector.error ?? { code: 'internal' as const, message: 'The reply ended without finishing.' };
    throw new ApiError(failure.code, failure.message, { headers: prepared.quotaHeaders });
  }
  context.json(200, body, prepared.quotaHeaders);
}

/** Streams encoded frames with backpressure; stops the pipeline as soon as the client is gone. */
async function replyStream(
  context: HttpContext,
  services: Services,
  events: AsyncGenerator<ChatEvent>,
  options: { contentType: string; headers: Record<string, string>; heartbeat?: typeof SSE_HEARTBEAT },
  encode: (event: ChatEvent) => string | undefined,
): Promise<void> {
  const stream = context.stream({ contentType: options.contentType, headers: options.headers, ...(options.heartbeat ? { heartbeat: options.heartbeat } : {}) });
  services.metrics.activeStreams.inc();
  try {
    for await (const event of events) {
      const frame = encode(event);
      // write() resolves once the client can take more, or false when it left: then breaking out
      // returns the generator, which closes the upstream request at once.
      if (frame !== undefined && !(await stream.write(frame))) break;
    }
  } finally {
    services.metrics.activeStreams.dec();
    stream.end();
  }
}

/**
 * Reads the events up to `sources` before the stream opens, so a failed search is still an
 * ordinary JSON error (502 upstream_error / 504 upstream_timeout, quota given back) instead of an
 * `error` event on a 200 stream. The held events are replayed first.
 */
async function holdUntilSources(events: AsyncGenerator<ChatEvent>, headers: Record<string, string>): Promise<AsyncGenerator<ChatEvent>> {
  const held: ChatEvent[] = [];
  for (;;) {
    const next = await events.next();
    if (next.done) break;
    if (next.value.type === 'error') {
      await events.return(undefined);
      throw new ApiError(next.value.code, next.value.message, { headers });
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

async function sseStream(context: HttpContext, services: Services, pipeline: ChatPipeline, prepared: PreparedChat): Promise<void> {
  const encoder = new SseEncoder();
  let events = pipeline.events(prepared, context.signal);
  if (prepared.kind === 'search' || prepared.request.web_search) {
    events = await holdUntilSources(events, prepared.quotaHeaders);
    if (context.signal.aborted) return;
  }
  return replyStream(
    context,
    services,
    events,
    { contentType: 'text/event-stream; charset=utf-8', headers: { ...prepared.quotaHeaders, 'X-Accel-Buffering': 'no' }, heartbeat: SSE_HEARTBEAT },
    (event) => encoder.encode(event),
  );
}

function ndjsonStream(context: HttpContext, services: Services, pipeline: ChatPipeline, prepared: PreparedChat): Promise<void> {
  const encoder = new NdjsonEncoder(prepared.acceptedAt);
  return replyStream(
    context,
    services,
    pipeline.events(prepared, context.signal),
    { contentType: 'application/x-ndjson; charset=utf-8', headers: { ...prepared.quotaHeaders, 'X-Accel-Buffering': 'no' } },
    (event) => encoder.encode(event),
  );
}

function wantsEventStream(context: HttpContext): boolean {
  return (context.request.headers.accept ?? '').toLowerCase().includes('text/event-stream');
}

/** The chat route group over one pipeline. */
export function chatRoutes(services: Services, registry: ProviderRegistry): Route[] {
  const pipeline = new ChatPipeline(services, registry);
  const prepare = (context: HttpContext, kind: ChatKind) => pipeline.prepare(context, kind);
  return [
    {
      method: 'POST',
      path: '/api/chat',
      handler: async (context) => replyJson(context, pipeline, await prepare(context, 'chat')),
    },
    {
      method: 'POST',
      path: '/api/chat/stream',
      handler: async (context) => sseStream(context, services, pipeline, await prepare(context, 'chat')),
    },
    {
      method: 'POST',
      path: '/api/chat/progress',
      handler: async (context) => ndjsonStream(context, services, pipeline, await prepare(context, 'chat')),
    },
    {
      method: 'POST',
      path: '/api/chat/search',
      handler: async (context) => {
        const prepared = await prepare(context, 'search');
        if (wantsEventStream(context)) return sseStream(context, services, pipeline, prepared);
        return replyJson(context, pipeline, prepared);
      },
    },
  ];
}
