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
    maxAnswerBytes: services.config.maxAnswerBytes,
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
    // The 200 is the acknowledgement: it waits for the quota take to be on disk.
    await admitted.job.reservation.durable;
    context.json(200, body, admitted.headers);
  };

  /** Streams encoded frames with backpressure; stops the pipeline as soon as the client is gone. */
  const replyStream = async (
    context: HttpContext,
    admitted: AdmittedChat,
    events: AsyncGenerator<ChatEvent>,
    prelude: Prelude,
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
    // write() resolves once the client can take more, or false when it left.
    const send = async (event: ChatEvent): Promise<boolean> => {
      observer.see(event);
      const frame = encode(event);
      return frame === undefined || (await stream.write(frame));
    };
    try {
      let open = true;
      let finished = prelude.finished;
      for (const event of prelude.held) if (open) open = await send(event);
      if (open && prelude.pending) {
        const next = await prelude.pending;
        if (next.done) finished = true;
        else open = await send(next.value);
      }
      if (open && !finished) {
        // Leaving this loop early returns the generator, which closes the upstream request at once.
        for await (const event of events) if (!(await send(event))) break;
      }
    } finally {
      await events.return(undefined);
      services.metrics.activeStreams.dec();
      stream.end();
    }
  };

  const sse = async (context: HttpContext, admitted: AdmittedChat): Promise<void> => {
    const encoder = new SseEncoder();
    const { events, observer } = observed(admitted, context.signal);
    const prelude = await runPrelude(events, admitted, { untilSources: wantsSearch(admitted.job) });
    if (context.signal.aborted) return;
    await replyStream(
      context,
      admitted,
      events,
      prelude,
      observer,
      { contentType: 'text/event-stream; charset=utf-8', heartbeat: SSE_HEARTBEAT },
      (event) => encoder.encode(event),
    );
  };

  const ndjson = async (context: HttpContext, admitted: AdmittedChat): Promise<void> => {
    const encoder = new NdjsonEncoder(admitted.acceptedAt);
    const { events, observer } = observed(admitted, context.signal);
    const prelude = await runPrelude(events, admitted, { untilSources: false });
    if (context.signal.aborted) return;
    await replyStream(context, admitted, events, prelude, observer, { contentType: 'application/x-ndjson; charset=utf-8' }, (event) =>
      encoder.encode(event),
    );
  };

  /** Admits, replies, and gives the request's slots back however the reply ended. */
  const serve =
    (kind: ChatKind, reply: (context: HttpContext) => (context: HttpContext, admitted: AdmittedChat) => Promise<void>) =>
    async (context: HttpContext): Promise<void> => {
      const encoder = reply(context);
      const admitted = await admitChat(services, registry, context, kind, { stream: encoder !== replyJson });
      try {
        await encoder(context, admitted);
      } finally {
        admitted.release();
      }
    };
  return [
    { method: 'POST', path: '/api/chat', handler: serve('chat', () => replyJson) },
    { method: 'POST', path: '/api/chat/stream', handler: serve('chat', () => sse) },
    { method: 'POST', path: '/api/chat/progress', handler: serve('chat', () => ndjson) },
    { method: 'POST', path: '/api/chat/search', handler: serve('search', (context) => (wantsEventStream(context) ? sse : replyJson)) },
  ];
}

/** Events pulled before the stream opened, to be sent first; `finished` when the sequence already ended. */
interface Prelude {
  held: ChatEvent[];
  /** An event asked for when the commit resolved, not yet arrived (a slow upstream): it comes next. */
  pending?: Promise<IteratorResult<ChatEvent>>;
  finished: boolean;
}

/**
 * Runs the pipeline ahead while the quota take becomes durable, so the upstream request starts
 * during the fsync, and holds what it yields: nothing is sent before the take is on disk. With
 * `untilSources` it also reads up to the `sources` event, so a failed search is still an ordinary
 * JSON error (502 upstream_error / 504 upstream_timeout, quota given back) instead of an `error`
 * event on a 200 stream. Holding is bounded: it lasts one commit (or one search).
 */
async function runPrelude(events: AsyncGenerator<ChatEvent>, admitted: AdmittedChat, options: { untilSources: boolean }): Promise<Prelude> {
  const held: ChatEvent[] = [];
  let durable = false;
  const committed = admitted.job.reservation.durable.then(() => {
    durable = true;
  });
  let sourcesSeen = !options.untilSources;
  try {
    while (!(durable && sourcesSeen)) {
      const next = events.next();
      // Until the commit resolves, keep pulling; once it has, pull only what the search hold needs.
      const result = durable ? await next : await Promise.race([next, committed.then(() => undefined)]);
      if (result === undefined) {
        // The commit won the race: the stream may open now; the event asked for is still ours.
        if (sourcesSeen) return { held, pending: next, finished: false };
        const late = await next;
        if (late.done) return { held, finished: true };
        if (late.value.type === 'error' && options.untilSources) throw searchFailure(late.value, admitted);
        held.push(late.value);
        if (late.value.type === 'sources') sourcesSeen = true;
        continue;
      }
      if (result.done) {
        await committed;
        return { held, finished: true };
      }
      if (result.value.type === 'error' && options.untilSources) throw searchFailure(result.value, admitted);
      held.push(result.value);
      if (result.value.type === 'sources') sourcesSeen = true;
    }
    return { held, finished: false };
  } catch (error) {
    await events.return(undefined);
    throw error;
  }
}

function searchFailure(event: Extract<ChatEvent, { type: 'error' }>, admitted: AdmittedChat): ApiError {
  return new ApiError(event.code, event.message, { headers: errorHeaders(admitted, event) });
}

function wantsEventStream(context: HttpContext): boolean {
  return (context.request.headers.accept ?? '').toLowerCase().includes('text/event-stream');
}
