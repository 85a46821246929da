/**
 * The one generation core shared by every chat-like route: conversation, sources, generate,
 * persist, as events. It takes an admitted job, a cancellation signal and a sink, and pushes
 * ChatEvents to the sink in batches (what is ready at once, e.g. the deltas of one upstream read,
 * comes as one array, never empty), waiting while the sink cannot take more; it never sees a
 * socket, a header or a status. Errors never escape as exceptions: they end the sequence with one
 * `error` event. When the signal aborts, or the sink stops taking events, the sequence just stops;
 * either way the quota is settled and a partial answer saved before the run resolves.
 */
import type { ChatEvent, QuotaStamp } from '../domain/types.js';
import { isoTime } from '../domain/iso-time.js';
import { ApiError, ServerShutdown, toApiError } from '../errors.js';
import type { SessionMessage } from '../store/types.js';
import type { ChatDependencies, ChatJob, ChatSink } from './chat-job.js';
import { buildConversation, conversationOf, hasEarlierTurns } from './conversation.js';
import { estimateTokensFromChars } from '../providers/builtin.js';
import { promptChars } from './chat-request.js';
import { AnswerRecord, generate } from './generate.js';
import { persistTurn } from './persist.js';
import { gatherSources, NO_SOURCES, wantsSources } from './sources.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Runs admitted chat jobs. */
export class ChatPipeline {
  constructor(private readonly deps: ChatDependencies) {}

  /** Pushes the events of one job in batches: start, progress, sources, thinking, delta, then done or error. */
  async run(job: ChatJob, signal: CancelSignal, emit: ChatSink): Promise<void> {
    const { deps } = this;
    const { request, model, reservation } = job;
    if (signal.aborted) {
      // The client left while its quota was being taken: nothing was sent, so nothing is charged.
      await this.refund(job);
      return;
    }
    const newTurn: SessionMessage[] = job.given ? job.given.turn : [{ role: 'user', content: request.message, timestamp: isoTime() }];
    const answer = new AnswerRecord(request.session_id !== undefined);
    let settled = false;
    // The token budget is settled exactly once: on the real usage, on what was produced, or refunded.
    let tokensSettled = false;
    const promptTokens = estimateTokensFromChars(promptChars(request, job.given));

    const opening: ChatEvent[] = [
      { type: 'start', model: model.id, sessionId: request.session_id, quota: reservation.stamp },
      { type: 'progress', stage: 'accepted', message: 'Request accepted' },
    ];
    if (!(await emit(opening))) return;
    try {
      // Without a session nothing is read: the conversation is built without a promise round-trip.
      const conversation = job.request.session_id === undefined || job.given ? conversationOf(job, []) : await buildConversation(job, deps);
      if (hasEarlierTurns(job)) {
        const history: ChatEvent = {
          type: 'progress',
          stage: 'history',
          message: `Loaded ${conversation.storedTurns} stored and ${conversation.givenTurns} given turns`,
        };
        if (!(await emit([history]))) return;
      }
      const gathered = wantsSources(job) ? await gatherSources(job, deps, signal, emit) : NO_SOURCES;
      if (gathered === undefined) return;
      const bounds = { maxBytes: deps.maxAnswerBytes, maxTokens: request.max_tokens };
      const generated = await generate(job, deps, conversation.messages, gathered, answer, bounds, signal, emit);
      if (generated === undefined) return;
      if (request.session_id !== undefined) {
        if (!(await emit([{ type: 'progress', stage: 'saving', message: 'Saving the turn to the session' }]))) return;
        await persistTurn(job, deps, newTurn, answer, { incomplete: generated.truncated });
      }
      settled = true;
      tokensSettled = true;
      const quota = await reservation.settle(generated.usage.input_tokens + generated.usage.output_tokens);
      await emit([
        {
          type: 'done',
          finishReason: generated.finishReason,
          usage: generated.usage,
          timestamp: isoTime(),
          model: generated.model,
          attempts: generated.attempts,
          quota,
        },
      ]);
    } catch (error) {
      // A client that left is not written to; a server shutting down tells the client it stops.
      if (signal.aborted && !(signal.reason instanceof ServerShutdown)) return;
      const apiError = toApiError(error);
      if (!(error instanceof ApiError)) deps.logger.error({ err: error, model: model.id }, 'chat pipeline failed');
      // Nothing was produced: the caller got nothing for their quota, so it goes back.
      tokensSettled = true;
      const quota = answer.produced ? await this.settleProduced(job, promptTokens, answer) : await this.refund(job);
      await emit([{ type: 'error', code: apiError.code, message: apiError.message, ...(quota ? { quota } : {}) }]);
    } finally {
      // A client that left pays for the prompt and what was produced (never less than the prompt).
      if (!tokensSettled) await this.settleProduced(job, promptTokens, answer);
      // Reached on abort, on failure and when the consumer stopped taking events (client gone).
      if (!settled && (answer.text.length > 0 || answer.toolCalls.length > 0)) {
        await persistTurn(job, deps, newTurn, answer, { incomplete: true }).catch((saveError: unknown) =>
          deps.logger.error({ err: saveError }, 'saving a partial turn failed'),
        );
      }
    }
  }

  /** Settles the token budget on the prompt and the answer produced so far; a failure is logged, never thrown. */
  private async settleProduced(job: ChatJob, promptTokens: number, answer: AnswerRecord): Promise<QuotaStamp | undefined> {
    try {
      return await job.reservation.settle(promptTokens + estimateTokensFromChars(answer.chars));
    } catch (error) {
      this.deps.logger.error({ err: error }, 'settling the token budget failed');
      return undefined;
    }
  }

  /** Gives the job's quota back; a failed refund is logged, never thrown. */
  private async refund(job: ChatJob): Promise<QuotaStamp | undefined> {
    try {
      return await job.reservation.refund();
    } catch (error) {
      this.deps.logger.error({ err: error }, 'quota refund failed');
      return undefined;
    }
  }
}
