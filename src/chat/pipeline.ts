/**
 * The one generation core. `prepare` does everything that can still fail with a plain JSON error
 * (caller, body, model, capabilities, quota); `events` then runs history, retrieval, search and the
 * provider stream and yields ChatEvents. Every chat route consumes the same sequence through its
 * own encoder; none of them generates on its own.
 */
import type { Caller } from '../auth/types.js';
import type { ModelConfig } from '../config.js';
import { ApiError, toApiError } from '../errors.js';
import type { HttpContext } from '../http/types.js';
import { estimateTokens, estimateTokensFromChars } from '../providers/builtin.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ChatProvider, ProviderMessage } from '../providers/types.js';
import { UpstreamFailure } from '../providers/upstream.js';
import type { QuotaReservation } from '../quota/types.js';
import type { Services } from '../services.js';
import type { SessionMessage } from '../store/types.js';
import type { ChatEvent, FinishReason, Source, Usage } from './events.js';
import { parseChatRequest, type ChatRequest } from './request.js';
import { toSearchQuery } from '../search/normalise.js';

/** Which route asked: the search route forces the search step and pays the `search` cost. */
export type ChatKind = 'chat' | 'search';

const DEFAULT_TOP_K = 4;
const DEFAULT_MAX_RESULTS = 5;
/** A retrieved passage is cited whole up to this length (the model reads it; clients show it). */
const SNIPPET_MAX_CHARS = 1200;
/** NDJSON `generating` progress is repeated at most this often. */
const PROGRESS_INTERVAL_MS = 250;

/** A request that passed every pre-stream check and holds its quota reservation. */
export interface PreparedChat {
  readonly kind: ChatKind;
  readonly caller: Caller;
  readonly request: ChatRequest;
  readonly model: ModelConfig;
  readonly provider: ChatProvider;
  readonly reservation: QuotaReservation;
  /** performance.now() when the request was accepted (for elapsed_ms and time to first token). */
  readonly acceptedAt: number;
  /** RateLimit-* headers for the reply. */
  readonly quotaHeaders: Record<string, string>;
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
}

function isAbort(signal: AbortSignal): boolean {
  return signal.aborted;
}

/** The generation core shared by every chat route. */
export class ChatPipeline {
  constructor(
    private readonly services: Services,
    private readonly registry: ProviderRegistry,
  ) {}

  /** Caller, body, model, capabilities, quota: each failure here is an ordinary JSON error. */
  async prepare(context: HttpContext, kind: ChatKind): Promise<PreparedChat> {
    const acceptedAt = performance.now();
    const caller = await this.services.auth.caller(context);
    const request = parseChatRequest(await context.readJson(), kind === 'search');
    const { model, provider } = this.registry.resolve(request.model);
    // Quota is taken last, after everything that could refuse the request for free.
    const reservation = await this.services.quota.reserve(caller, kind === 'search' ? 'search' : 'chat');
    return {
      kind,
      caller,
      request,
      model,
      provider,
      reservation,
      acceptedAt,
      quotaHeaders: this.services.quota.headers(reservation.stamp),
    };
  }

  /**
   * Runs the request and yields its events: start, progress, sources, thinking, delta, then done
   * or error. Errors never escape as exceptions; when `signal` aborts the sequence just stops.
   * A partial answer left by an abort or an upstream failure is stored marked incomplete.
   */
  async *events(prepared: PreparedChat, signal: AbortSignal): AsyncGenerator<ChatEvent> {
    const { request, model, provider, caller } = prepared;
    const { metrics, logger } = this.services;
    const sessionId = request.session_id;
    const userTurn: SessionMessage = { role: 'user', content: request.message, timestamp: new Date().toISOString() };
    // The answer text is kept only to be stored in a session; otherwise only its length is, so a
    // long stream to a slow reader holds no copy of everything already sent.
    const keepAnswer = sessionId !== undefined;
    let answer = '';
    let answerChars = 0;
    let thinkingSeen = false;
    let produced = false;
    let settled = false;
    let upstreamStarted = 0;

    if (signal.aborted) {
      // The client left while its quota was being taken: nothing was sent, so nothing is charged.
      await prepared.reservation.refund().catch((refundError: unknown) => logger.error({ err: refundError }, 'quota refund failed'));
      return;
    }
    yield { type: 'start', model: model.id, sessionId, quota: prepared.reservation.stamp };
    yield { type: 'progress', stage: 'accepted', message: 'Request accepted' };

    try {
      const messages: ProviderMessage[] = [];
      if (request.system) messages.push({ role: 'system', content: request.system });
      if (sessionId !== undefined || (request.history && request.history.length > 0)) {
        let stored = 0;
        if (sessionId !== undefined) {
          const session = await this.services.sessions.get(caller.id, sessionId, this.services.config.sessionMaxTurns);
          for (const turn of session?.messages ?? []) messages.push({ role: turn.role, content: turn.content });
          stored = session?.messages.length ?? 0;
        }
        for (const turn of request.history ?? []) messages.push(turn);
        yield { type: 'progress', stage: 'history', message: `Loaded ${stored} stored and ${request.history?.length ?? 0} given turns` };
      }
      messages.push({ role: 'user', content: request.message });

      const sources: Source[] = [];
      let ranRetrieval = false;
      if (request.rag) {
        ranRetrieval = true;
        yield { type: 'progress', stage: 'retrieval', message: 'Searching the knowledge base' };
        const options = typeof request.rag === 'object' ? request.rag : {};
        const started = performance.now();
        const passages = await this.services.retriever.retrieve(
          request.message,
          { topK: options.top_k ?? DEFAULT_TOP_K, ...(options.collection ? { collection: options.collection } : {}) },
          signal,
        );
        metrics.retrievalDuration.observe((performance.now() - started) / 1000);
        for (const passage of passages) {
          sources.push({
            index: sources.length + 1,
            kind: 'document',
            title: passage.title,
            ...(passage.url ? { url: passage.url } : {}),
            snippet: cut(passage.text, SNIPPET_MAX_CHARS),
          });
        }
      }
      let search: { provider: string; query: string; resultCount: number } | undefined;
      if (prepared.kind === 'search' || request.web_search) {
        ranRetrieval = true;
        yield { type: 'progress', stage: 'search', message: 'Searching the web' };
        const fromFlag = typeof request.web_search === 'object' ? request.web_search.max_results : undefined;
        const maxResults = request.max_results ?? fromFlag ?? DEFAULT_MAX_RESULTS;
        const searcher = this.services.search!;
        const results = await searcher.search(request.message, { maxResults }, signal);
        for (const result of results.slice(0, maxResults)) {
          sources.push({
            index: sources.length + 1,
            kind: 'web',
            title: result.title,
            ...(result.url ? { url: result.url } : {}),
            snippet: cut(result.snippet, SNIPPET_MAX_CHARS),
          });
        }
        search = { provider: searcher.name, query: toSearchQuery(request.message), resultCount: results.length };
        yield { type: 'search', ...search };
      }
      if (ranRetrieval) yield { type: 'sources', sources };

      yield { type: 'progress', stage: 'generating', message: `Generating with ${model.id}`, outputTokens: 0 };
      upstreamStarted = performance.now();
      let usage: Usage | undefined;
      let finish: FinishReason = 'stop';
      let deltas = 0;
      let lastProgress = performance.now();
      const stream = provider.stream(
        {
          model,
          messages,
          temperature: request.temperature,
          maxTokens: request.max_tokens,
          deepThinking: request.deep_thinking ?? false,
          language: request.language,
          sources,
          looked: ranRetrieval,
        },
        signal,
      );
      for await (const event of stream) {
        switch (event.type) {
          case 'thinking':
            // Reasoning is only shown when it was asked for, and never mixed into the answer.
            if (!request.deep_thinking) break;
            if (!produced) metrics.timeToFirstToken.observe({ provider: provider.name }, (performance.now() - prepared.acceptedAt) / 1000);
            produced = true;
            if (!thinkingSeen) {
              thinkingSeen = true;
              yield { type: 'progress', stage: 'thinking', message: 'The model is reasoning' };
            }
            yield { type: 'thinking', text: event.text };
            break;
          case 'delta': {
            if (!produced) metrics.timeToFirstToken.observe({ provider: provider.name }, (performance.now() - prepared.acceptedAt) / 1000);
            produced = true;
            if (keepAnswer) answer += event.text;
            answerChars += event.text.length;
            deltas += 1;
            yield { type: 'delta', text: event.text };
            const now = performance.now();
            if (now - lastProgress >= PROGRESS_INTERVAL_MS) {
              lastProgress = now;
              yield { type: 'progress', stage: 'generating', message: `Generating with ${model.id}`, outputTokens: deltas };
            }
            break;
          }
          case 'usage':
            usage = { input_tokens: event.inputTokens, output_tokens: event.outputTokens };
            break;
          case 'finish':
            finish = event.reason;
            break;
        }
      }
      usage ??= {
        input_tokens: estimateTokens(messages.map((message) => message.content).join('\n')),
        output_tokens: estimateTokensFromChars(answerChars),
      };
      if (provider.name !== 'builtin') metrics.upstreamDuration.observe({ provider: provider.name, outcome: 'ok' }, (performance.now() - upstreamStarted) / 1000);
      metrics.outputTokens.inc({ provider: provider.name }, usage.output_tokens);

      if (sessionId !== undefined) {
        yield { type: 'progress', stage: 'saving', message: 'Saving the turn to the session' };
        await this.services.sessions.append(caller.id, sessionId, [userTurn, { role: 'assistant', content: answer, timestamp: new Date().toISOString() }]);
      }
      settled = true;
      yield { type: 'done', finishReason: finish, usage, timestamp: new Date().toISOString() };
    } catch (error) {
      if (isAbort(signal)) {
        if (upstreamStarted > 0 && provider.name !== 'builtin') {
          metrics.upstreamDuration.observe({ provider: provider.name, outcome: 'aborted' }, (performance.now() - upstreamStarted) / 1000);
        }
        return;
      }
      const apiError = toApiError(error);
      if (!(error instanceof ApiError)) logger.error({ err: error, model: model.id }, 'chat pipeline failed');
      if (error instanceof UpstreamFailure && upstreamStarted > 0) {
        // The label is the contract code, as for search and images; the finer reason goes to the log.
        metrics.upstreamErrors.inc({ provider: provider.name, code: error.code });
        metrics.upstreamDuration.observe({ provider: provider.name, outcome: 'error' }, (performance.now() - upstreamStarted) / 1000);
        logger.warn({ provider: provider.name, model: model.id, reason: error.reason }, 'upstream failed');
      }
      // Nothing was produced: the caller got nothing for their quota, so it goes back.
      if (!produced) await prepared.reservation.refund().catch((refundError: unknown) => logger.error({ err: refundError }, 'quota refund failed'));
      yield { type: 'error', code: apiError.code, message: apiError.message };
    } finally {
      // Reached on abort, on failure and when the consumer stopped reading (client gone).
      if (!settled && sessionId !== undefined && answer.length > 0) {
        await this.services.sessions
          .append(caller.id, sessionId, [userTurn, { role: 'assistant', content: answer, timestamp: new Date().toISOString(), incomplete: true }])
          .catch((saveError: unknown) => logger.error({ err: saveError }, 'saving a partial turn failed'));
      }
    }
  }
}
