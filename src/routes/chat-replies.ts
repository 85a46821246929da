/**
 * How a chat-like route answers from the one pipeline: a JSON body folded from the events, or a
 * stream of encoded frames with backpressure. /api/chat/* and /v1/chat/completions share these;
 * each brings only its encoder (or collector).
 */
import { ChatPipeline } from '../core/chat-pipeline.js';
import { wantsSearch } from '../core/sources.js';
import type { ChatEvent } from '../domain/types.js';
import { promptChars } from '../core/chat-request.js';
import { ApiError, toApiError } from '../errors.js';
import { estimateTokensFromChars } from '../providers/builtin.js';
import type { HttpContext } from '../http/types.js';
import type { Services } from '../services.js';
import type { AdmittedChat } from './admit.js';
import type { ResumableRun } from '../core/resumable-runs.js';
import { ChatResultCollector } from './chat-encoders.js';
import { ChatObserver } from './chat-metrics.js';
import { rateLimitHeaders } from './headers.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Folds a request's events into one JSON body. */
export interface ChatCollector {
  add(event: ChatEvent): void;
  /** The complete body, or undefined when the sequence did not end in `done`. */
  body(): unknown;
}

/** How a stream is framed: its content type, an optional keep-alive, and the frame of each event. */
export interface StreamFraming {
  contentType: string;
  heartbeat?: { intervalMs: number; frame: string };
  /** The frame for an event, or undefined for events this stream does not carry. */
  encode(event: ChatEvent): string | undefined;
  /** A frame written once the sequence ended in `done` (`data: [DONE]`), if any. */
  trailer?: string;
}

/** The error event's refunded quota, when the pipeline gave it back, as headers; otherwise the admitted ones. */
function errorHeaders(admitted: AdmittedChat, event: Extract<ChatEvent, { type: 'error' }>): Record<string, string> {
  return event.quota ? rateLimitHeaders(event.quota) : admitted.headers;
}

/** The JSON and stream replies over one pipeline. */
export class ChatReplies {
  private readonly pipeline: ChatPipeline;

  constructor(private readonly services: Services) {
    this.pipeline = new ChatPipeline({
      sessions: services.sessions,
      retriever: services.knowledge,
      search: services.search,
      logger: services.logger,
      sessionMaxTurns: services.config.sessionMaxTurns,
      maxAnswerBytes: services.config.maxAnswerBytes,
      cooldowns: services.models.cooldowns,
      onAttempt: (model, outcome, fellBack) => {
        services.metrics.modelAttempts.inc({ model, outcome });
        if (fellBack) services.metrics.fallbacks.inc({ model });
      },
    });
  }

  private observed(admitted: AdmittedChat, context: HttpContext) {
    const { job } = admitted;
    return {
      events: this.pipeline.run(job, context.signal),
      observer: new ChatObserver(this.services.metrics, job.provider.name, admitted.acceptedAt, {
        log: this.services.usage,
        caller: job.caller,
        route: context.request.route,
        model: job.model.id,
        promptTokens: estimateTokensFromChars(promptChars(job.request, job.given)),
      }),
    };
  }

  /** Collects the whole reply and answers with one JSON body (or the error that ended it). */
  async json(context: HttpContext, admitted: AdmittedChat, collector: ChatCollector): Promise<void> {
    const { events, observer } = this.observed(admitted, context);
    try {
      for await (const batch of events) {
        for (const event of batch) {
          observer.see(event);
          collector.add(event);
          if (event.type === 'error') {
            if (context.signal.aborted) return;
            throw new ApiError(event.code, event.message, { headers: errorHeaders(admitted, event) });
          }
        }
      }
      if (context.signal.aborted) return;
      const body = collector.body();
      if (!body) throw new ApiError('internal', 'The reply ended without finishing.', { headers: admitted.headers });
      // The 200 is the acknowledgement: it waits for the quota take to be on disk.
      await admitted.job.reservation.durable;
      context.json(200, body, admitted.headers);
    } catch (error) {
      observer.fail(toApiError(error).status);
      throw error;
    } finally {
      observer.finish();
    }
  }

  /**
   * Starts a resumable generation for an admitted job: it runs with its own signal, its events go
   * into the stream log, and the slots are given back when it ends (not when this request does).
   */
  startResumable(context: HttpContext, admitted: AdmittedChat): Promise<ResumableRun> {
    const { job } = admitted;
    const { observer } = this.observed(admitted, context);
    const collector = new ChatResultCollector();
    const release = admitted.release;
    // The request that started it may end long before the generation: the run owns the slots now.
    admitted.release = () => undefined;
    const pipeline = this.pipeline;
    async function* observedEvents(signal: CancelSignal): AsyncGenerator<ChatEvent> {
      for await (const batch of pipeline.run(job, signal)) {
        for (const event of batch) {
          observer.see(event);
          yield event;
        }
      }
    }
    return this.services.resumable.start({
      owner: job.caller.id,
      events: observedEvents,
      collect: (event) => {
        collector.add(event);
        return event.type === 'done' ? (collector.body() as unknown as Record<string, unknown> | undefined) : undefined;
      },
      onEnd: () => {
        observer.finish();
        release();
      },
      quota: job.reservation.stamp,
      model: job.model.id,
    });
  }

  /**
   * Streams encoded frames with backpressure; stops the pipeline as soon as the client is gone.
   * With `untilSources`, a failed search is still an ordinary JSON error (see runPrelude).
   */
  async stream(context: HttpContext, admitted: AdmittedChat, framing: StreamFraming, options: { untilSources: boolean }): Promise<void> {
    const { events, observer } = this.observed(admitted, context);
    try {
      await this.streamObserved(context, admitted, framing, options, events, observer);
    } catch (error) {
      observer.fail(toApiError(error).status);
      throw error;
    } finally {
      observer.finish();
    }
  }

  private async streamObserved(
    context: HttpContext,
    admitted: AdmittedChat,
    framing: StreamFraming,
    options: { untilSources: boolean },
    events: AsyncGenerator<ChatEvent[]>,
    observer: ChatObserver,
  ): Promise<void> {
    const prelude = await runPrelude(events, admitted, options);
    if (context.signal.aborted) return;
    const { metrics } = this.services;
    const stream = context.stream({
      contentType: framing.contentType,
      headers: { ...admitted.headers, 'X-Accel-Buffering': 'no' },
      ...(framing.heartbeat ? { heartbeat: framing.heartbeat } : {}),
    });
    metrics.activeStreams.inc();
    // Each frame is its own write, and the next waits until the client can take more: a client
    // that stops reading holds one frame in the socket layer, not a batch. (Joining a batch into
    // one write saved no CPU that could be measured, and fast clients beside stalled ones streamed
    // 6–22% slower with it: docs/benchmarks.md, fourth step.) False once the client left.
    const send = async (batch: readonly ChatEvent[]): Promise<boolean> => {
      for (const event of batch) {
        observer.see(event);
        const frame = framing.encode(event);
        if (frame !== undefined && !(await stream.write(frame))) return false;
        if (event.type === 'done' && framing.trailer && !(await stream.write(framing.trailer))) return false;
      }
      return true;
    };
    try {
      let open = prelude.held.length === 0 || (await send(prelude.held));
      let finished = prelude.finished;
      if (open && prelude.pending) {
        const next = await prelude.pending;
        if (next.done) finished = true;
        else open = await send(next.value);
      }
      if (open && !finished) {
        // Leaving this loop early returns the generator, which closes the upstream request at once.
        for await (const batch of events) if (!(await send(batch))) break;
      }
    } finally {
      await events.return(undefined);
      metrics.activeStreams.dec();
      stream.end();
    }
  }
}

/** The search step is held before the stream opens only when the job searches. */
export function holdsSearch(admitted: AdmittedChat): boolean {
  return wantsSearch(admitted.job);
}

/** Events pulled before the stream opened, to be sent first; `finished` when the sequence already ended. */
interface Prelude {
  held: ChatEvent[];
  /** A batch asked for when the commit resolved, not yet arrived (a slow upstream): it comes next. */
  pending?: Promise<IteratorResult<ChatEvent[]>>;
  finished: boolean;
}

/**
 * Runs the pipeline ahead while the quota take becomes durable, so the upstream request starts
 * during the fsync, and holds what it yields: nothing is sent before the take is on disk. With
 * `untilSources` it also reads up to the `sources` event, so a failed search is still an ordinary
 * JSON error (502 upstream_error / 504 upstream_timeout, quota given back) instead of an `error`
 * event on a 200 stream. Holding is bounded: it lasts one commit (or one search).
 */
async function runPrelude(
  events: AsyncGenerator<ChatEvent[]>,
  admitted: AdmittedChat,
  options: { untilSources: boolean },
): Promise<Prelude> {
  const held: ChatEvent[] = [];
  let durable = false;
  const committed = admitted.job.reservation.durable.then(() => {
    durable = true;
  });
  let sourcesSeen = !options.untilSources;
  // Holds a batch, noting the sources; a failed search is thrown as a JSON error.
  const hold = (batch: readonly ChatEvent[]): void => {
    for (const event of batch) {
      if (event.type === 'error' && options.untilSources) throw searchFailure(event, admitted);
      held.push(event);
      if (event.type === 'sources') sourcesSeen = true;
    }
  };
  try {
    while (!(durable && sourcesSeen)) {
      const next = events.next();
      // Until the commit resolves, keep pulling; once it has, pull only what the search hold needs.
      const result = durable ? await next : await Promise.race([next, committed.then(() => undefined)]);
      if (result === undefined) {
        // The commit won the race: the stream may open now; the batch asked for is still ours.
        if (sourcesSeen) return { held, pending: next, finished: false };
        const late = await next;
        if (late.done) return { held, finished: true };
        hold(late.value);
        continue;
      }
      if (result.done) {
        await committed;
        return { held, finished: true };
      }
      hold(result.value);
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
