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
import type { HttpContext, ResponseStream } from '../http/types.js';
import type { Services } from '../services.js';
import type { AdmittedChat } from './admit.js';
import type { ResumableRun } from '../core/resumable-runs.js';
import { ChatResultCollector } from './chat-encoders.js';
import { ChatObserver } from './chat-metrics.js';
import { rateLimitHeaders } from './headers.js';

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

  /** What measures and logs one request's reply. */
  private observerOf(admitted: AdmittedChat, context: HttpContext): ChatObserver {
    const { job } = admitted;
    return new ChatObserver(this.services.metrics, job.provider.name, admitted.acceptedAt, {
      log: this.services.usage,
      caller: job.caller,
      route: context.request.route,
      model: job.model.id,
      promptTokens: estimateTokensFromChars(promptChars(job.request, job.given)),
    });
  }

  /** Collects the whole reply and answers with one JSON body (or the error that ended it). */
  async json(context: HttpContext, admitted: AdmittedChat, collector: ChatCollector): Promise<void> {
    const observer = this.observerOf(admitted, context);
    try {
      let failure: ApiError | undefined;
      await this.pipeline.run(admitted.job, context.signal, (batch) => {
        for (const event of batch) {
          observer.see(event);
          collector.add(event);
          if (event.type === 'error') {
            failure = new ApiError(event.code, event.message, { headers: errorHeaders(admitted, event) });
            return false;
          }
        }
        return true;
      });
      if (context.signal.aborted) return;
      if (failure) throw failure;
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
    const observer = this.observerOf(admitted, context);
    const collector = new ChatResultCollector();
    const release = admitted.release;
    // The request that started it may end long before the generation: the run owns the slots now.
    admitted.release = () => undefined;
    const pipeline = this.pipeline;
    return this.services.resumable.start({
      owner: job.caller.id,
      events: (signal, emit) =>
        pipeline.run(job, signal, (batch) => {
          for (const event of batch) observer.see(event);
          return emit(batch);
        }),
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
   * With `untilSources`, a failed search is still an ordinary JSON error (see StreamDelivery).
   */
  async stream(context: HttpContext, admitted: AdmittedChat, framing: StreamFraming, options: { untilSources: boolean }): Promise<void> {
    const observer = this.observerOf(admitted, context);
    try {
      await new StreamDelivery(context, admitted, framing, options, observer, this.services).run(this.pipeline);
    } catch (error) {
      observer.fail(toApiError(error).status);
      throw error;
    } finally {
      observer.finish();
    }
  }
}

/**
 * One streamed reply, fed by the pipeline's pushes. Until the quota take is durable (and, with
 * `untilSources`, until the sources came) events are held and nothing is sent, so the upstream
 * request runs during the fsync; then the stream opens, the held events go first, and each later
 * event is written as it comes. With `untilSources` a failed search is still an ordinary JSON error
 * (502 upstream_error / 504 upstream_timeout, quota given back) instead of an `error` event on a 200
 * stream. Holding is bounded: it lasts one commit (or one search).
 *
 * Each frame is its own write, and the next waits until the client can take more: a client that
 * stops reading holds one frame in the socket layer, not a batch, and the pipeline waits on it.
 * (Joining a batch into one write saved no CPU that could be measured, and fast clients beside
 * stalled ones streamed 6–22% slower with it: docs/benchmarks.md, fourth step.)
 */
class StreamDelivery {
  /** Events held until the stream opens; undefined once it opened (or will not). */
  private held: ChatEvent[] | undefined = [];
  private durable = false;
  private sourcesSeen: boolean;
  /** Why the reply is a JSON error instead of a stream: a failed search, or a take that did not become durable. */
  private failure: unknown;
  private stream: ResponseStream | undefined;
  /** The held events being written while the client could not take them at once; later batches wait for it. */
  private flushing: Promise<boolean> | undefined;

  constructor(
    private readonly context: HttpContext,
    private readonly admitted: AdmittedChat,
    private readonly framing: StreamFraming,
    private readonly options: { untilSources: boolean },
    private readonly observer: ChatObserver,
    private readonly services: Services,
  ) {
    this.sourcesSeen = !options.untilSources;
  }

  async run(pipeline: ChatPipeline): Promise<void> {
    const committed = this.admitted.job.reservation.durable.then(
      () => {
        this.durable = true;
        if (this.ready()) void this.open();
      },
      (error: unknown) => {
        this.failure ??= error;
      },
    );
    try {
      await pipeline.run(this.admitted.job, this.context.signal, this.push);
      if (this.held !== undefined) {
        // The reply ended before the stream opened (faster than the commit, or cut): it opens once the take is durable.
        await committed;
        if (this.held !== undefined && this.failure === undefined) await this.open();
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.flushing !== undefined) await this.flushing;
    } finally {
      if (this.stream !== undefined) {
        this.services.metrics.activeStreams.dec();
        this.stream.end();
      }
    }
  }

  /** The pipeline's sink: holds, or writes; false once the client is gone or the reply became a JSON error. */
  private readonly push = (batch: ChatEvent[]): boolean | Promise<boolean> => {
    if (this.failure !== undefined) return false;
    const held = this.held;
    if (held !== undefined) {
      for (const event of batch) {
        if (event.type === 'error' && this.options.untilSources) {
          this.failure = new ApiError(event.code, event.message, { headers: errorHeaders(this.admitted, event) });
          return false;
        }
        held.push(event);
        if (event.type === 'sources') this.sourcesSeen = true;
      }
      return this.ready() ? this.open() : true;
    }
    if (this.stream === undefined) return false;
    const flushing = this.flushing;
    if (flushing !== undefined) return flushing.then((open) => open && this.send(batch));
    return this.send(batch);
  };

  private ready(): boolean {
    return this.held !== undefined && this.durable && this.sourcesSeen && this.failure === undefined;
  }

  /** Opens the stream (unless the client already left) and writes the held events first. */
  private open(): boolean | Promise<boolean> {
    const held = this.held ?? [];
    this.held = undefined;
    if (this.context.signal.aborted) return false;
    this.stream = this.context.stream({
      contentType: this.framing.contentType,
      headers: { ...this.admitted.headers, 'X-Accel-Buffering': 'no' },
      ...(this.framing.heartbeat ? { heartbeat: this.framing.heartbeat } : {}),
    });
    this.services.metrics.activeStreams.inc();
    const sent = this.send(held);
    if (sent === true || sent === false) return sent;
    const flushing = sent.then((open) => {
      if (this.flushing === flushing) this.flushing = undefined;
      return open;
    });
    this.flushing = flushing;
    return flushing;
  }

  /** Writes a batch frame by frame: true when the client took it all at once; false once it is gone. */
  private send(batch: readonly ChatEvent[]): boolean | Promise<boolean> {
    for (let index = 0; index < batch.length; index++) {
      const written = this.write(batch[index] as ChatEvent);
      if (written !== true) return written === false ? false : this.sendAfter(written, batch, index + 1);
    }
    return true;
  }

  private async sendAfter(waiting: Promise<boolean>, batch: readonly ChatEvent[], from: number): Promise<boolean> {
    if (!(await waiting)) return false;
    for (let index = from; index < batch.length; index++) {
      const written = this.write(batch[index] as ChatEvent);
      if (written !== true && !(await written)) return false;
    }
    return true;
  }

  /** One event's frame (and after `done`, the trailer); a write the client took at once is not awaited. */
  private write(event: ChatEvent): boolean | Promise<boolean> {
    this.observer.see(event);
    const stream = this.stream as ResponseStream;
    const frame = this.framing.encode(event);
    const written = frame === undefined ? true : stream.write(frame);
    const trailer = event.type === 'done' ? this.framing.trailer : undefined;
    if (trailer === undefined || written === false) return written;
    if (written === true) return stream.write(trailer);
    return written.then((open) => open && stream.write(trailer));
  }
}

/** The search step is held before the stream opens only when the job searches. */
export function holdsSearch(admitted: AdmittedChat): boolean {
  return wantsSearch(admitted.job);
}
