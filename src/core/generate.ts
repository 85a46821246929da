/**
 * Stage 3, generating: the provider's stream mapped onto chat events. Reasoning is passed on only
 * when deep thinking was asked for and never mixed into the answer; NDJSON `generating` progress
 * is repeated at most every PROGRESS_INTERVAL_MS with the number of answer deltas so far.
 *
 * Events are pushed to the consumer in batches: everything one provider batch (one upstream read)
 * produced goes out as one array, and a batch is always handed on before the stage waits for the
 * provider, so batching never holds an event back. A JSON reply folds a batch in one go; a stream
 * still writes it frame by frame. An upstream reply is pumped: each read goes from the socket
 * parser through the dialect and this stage to the consumer by plain calls, so a delta costs no
 * promise and a stream between two deltas holds no pending one.
 */
import {
  type Attempt,
  type BatchTaker,
  assertNever,
  type ChatEvent,
  type FinishReason,
  type ToolCall,
  type ToolCallFragment,
  type Usage,
} from '../domain/types.js';
import { estimateTokens, estimateTokensFromChars } from '../providers/builtin.js';
import type { ProviderEvent, ProviderMessage, ProviderStream } from '../providers/types.js';
import type { ModelCooldowns } from '../providers/cooldown.js';
import type { ResolvedModel } from '../providers/registry.js';
import { UpstreamError } from '../upstream/upstream-error.js';
import type { ChatDependencies, ChatJob, ChatSink } from './chat-job.js';
import { loopBusyFor, nextTurn } from './loop-share.js';
import type { Gathered } from './sources.js';
import type { CancelSignal } from '../domain/cancel.js';

/** NDJSON `generating` progress is repeated at most this often. */
const PROGRESS_INTERVAL_MS = 250;
/** Longest run of answer processing before the event loop is let through. */
const LOOP_SHARE_MS = 5;

/** The answer as it is produced: kept whole only when a session will store it. */
export class AnswerRecord {
  text = '';
  chars = 0;
  /** True once any part of the answer (a delta, a tool call, or shown reasoning) went out. */
  produced = false;
  /** The tool calls so far, assembled from their fragments (kept like the text). */
  readonly toolCalls: ToolCall[] = [];

  constructor(private readonly keepText: boolean) {}

  /** Counts (and when kept, appends) one answer delta. */
  add(text: string): void {
    if (this.keepText) this.text += text;
    this.chars += text.length;
  }

  /** Counts (and when kept, assembles) one tool-call fragment. */
  addToolCall(fragment: ToolCallFragment): void {
    this.chars += fragment.arguments.length + (fragment.name?.length ?? 0);
    if (!this.keepText) return;
    const call = this.toolCalls[fragment.index];
    if (call) call.arguments += fragment.arguments;
    else this.toolCalls[fragment.index] = { id: fragment.id ?? '', name: fragment.name ?? '', arguments: fragment.arguments };
  }
}

/**
 * Characters per token vary (code and many languages run under four, English prose over it), so
 * an answer only counts as ignoring `max_tokens` once its estimate (characters / 4) is twice the
 * limit: a model that honours the limit is never cut, one that ignores it is stopped soon enough.
 */
const MAX_TOKENS_SLACK = 2;

function ignoresMaxTokens(chars: number, maxTokens: number | undefined): boolean {
  return maxTokens !== undefined && estimateTokensFromChars(chars) > maxTokens * MAX_TOKENS_SLACK;
}

/** How generation ended; `truncated` when our own bound (not the model) cut the answer. */
export interface Generated {
  finishReason: FinishReason;
  usage: Usage;
  truncated: boolean;
  /** The model that answered. */
  model: string;
  /** The models tried before it (failed before answering, or skipped while cooling down). */
  attempts: Attempt[];
}

/** The answer's bounds: bytes always (`max_answer_bytes`), tokens when the request set `max_tokens`. */
export interface AnswerBounds {
  maxBytes: number;
  maxTokens: number | undefined;
}

/**
 * A failure that lets the next model try: the upstream could not be reached, timed out, was rate
 * limiting (429), failed (5xx) or broke off before any part of the answer came. Refusals of the
 * request itself (other 4xx: a bad key, an unknown model) are the caller's to see.
 */
function letsFallbackTry(error: unknown): error is UpstreamError {
  if (!(error instanceof UpstreamError)) return false;
  const status = /^status_(\d{3})$/.exec(error.reason)?.[1];
  return status === undefined || status === '429' || status.startsWith('5');
}

/** The candidates in order: those cooling down are skipped while any other is left. */
function candidatesOf(job: ChatJob, cooldowns: ModelCooldowns): { tried: ResolvedModel[]; skipped: Attempt[] } {
  const all: ResolvedModel[] = [{ model: job.model, provider: job.provider }, ...(job.fallbacks ?? [])];
  if (all.length === 1) return { tried: all, skipped: [] };
  const ready = all.filter((candidate) => cooldowns.coolingUntil(candidate.model.id) === undefined);
  if (ready.length === 0) return { tried: all, skipped: [] };
  const skipped = all
    .filter((candidate) => !ready.includes(candidate))
    .map((candidate) => ({ model: candidate.model.id, error_code: 'cooling_down' as const }));
  return { tried: ready, skipped };
}

/**
 * Hands a provider's batches to `take` until it answers false: pushed with no promise per read
 * where the provider can (the upstream dialects), else read with `for await` (the built-in model).
 * Stopping returns the provider's stream, which closes the upstream request.
 */
async function readBatches(stream: ProviderStream, take: BatchTaker<ProviderEvent>): Promise<void> {
  if (stream.pump !== undefined) return stream.pump(take);
  for await (const batch of stream) {
    const more = take(batch);
    if (more !== true && !(await more)) return;
  }
}

/**
 * Streams the model's reply for the conversation and sources to `emit`, recording the answer as it
 * goes. When the upstream fails before any part of the answer came, the model's fallbacks are tried
 * in order with the same request; once an answer event went out, a failure is the caller's error.
 * Resolves to undefined when the consumer stopped taking events (the upstream request is closed).
 */
export async function generate(
  job: ChatJob,
  deps: Pick<ChatDependencies, 'cooldowns' | 'onAttempt'>,
  messages: ProviderMessage[],
  gathered: Gathered,
  answer: AnswerRecord,
  bounds: AnswerBounds,
  signal: CancelSignal,
  emit: ChatSink,
): Promise<Generated | undefined> {
  const { request } = job;
  // The events produced since the last push; handed on before every wait.
  let out: ChatEvent[] = [];
  const deepThinking = request.deep_thinking ?? false;
  const showThinking = deepThinking || job.alwaysShowReasoning === true;
  const generating = (outputTokens: number): ChatEvent => ({
    type: 'progress',
    stage: 'generating',
    message: `Generating with ${job.model.id}`,
    outputTokens,
  });
  // Stages are reported in order: with deep thinking, reasoning (if any) comes before the answer.
  let generatingReported = !deepThinking;
  if (generatingReported) out.push(generating(0));
  let thinkingReported = false;
  let usage: Usage | undefined;
  let finishReason: FinishReason = 'stop';
  let deltas = 0;
  let lastProgress = performance.now();
  let answerBytes = 0;
  let truncated = false;
  // True once the upstream sent any part of the answer (shown or not): no fallback after that.
  let started = false;

  const { tried, skipped } = candidatesOf(job, deps.cooldowns);
  const attempts: Attempt[] = [...skipped];
  for (const attempt of skipped) deps.onAttempt?.(attempt.model, 'skipped', false);
  let answered: ResolvedModel | undefined;
  for (const [position, candidate] of tried.entries()) {
    try {
      // Whatever is ready goes out before the wait for the upstream's first batch.
      if (out.length > 0) {
        const taken = emit(out);
        out = [];
        if (taken !== true && !(await taken)) return undefined;
      }
      const stream = candidate.provider.stream(
        {
          model: candidate.model,
          messages,
          temperature: request.temperature,
          maxTokens: request.max_tokens,
          deepThinking,
          language: request.language,
          sources: gathered.sources,
          searched: gathered.searched,
          ...(job.options ? { options: job.options } : {}),
        },
        signal,
      );
      // An upstream that ignores max_tokens, or never stops, is cut by our own bounds, and a
      // consumer that stopped taking events stops the read: either returns the provider's stream,
      // which closes the upstream request.
      let stopped = false;
      // One upstream read's events: mapped, checked against the bounds and pushed on at once.
      // False stops the read; a promise holds it while the consumer cannot take more.
      const map: BatchTaker<ProviderEvent> = (batch) => {
        for (const event of batch) {
          switch (event.type) {
            case 'thinking':
              started = true;
              if (!showThinking) break;
              answer.produced = true;
              if (!thinkingReported) {
                thinkingReported = true;
                out.push({ type: 'progress', stage: 'thinking', message: 'The model is reasoning' });
              }
              // The provider's event is the chat event as it is (same shape): no copy per piece.
              out.push(event);
              break;
            case 'delta':
            case 'tool_call': {
              // Answer text and tool calls alike: the first reports the stage, both count against the bounds.
              started = true;
              if (!generatingReported) {
                generatingReported = true;
                out.push(generating(0));
              }
              answer.produced = true;
              const text = event.type === 'delta' ? event.text : event.arguments;
              answerBytes += Buffer.byteLength(text);
              const tokensPast = event.type === 'delta' && ignoresMaxTokens(answer.chars + text.length, bounds.maxTokens);
              if (answerBytes > bounds.maxBytes || tokensPast) {
                // What this read produced before the cut goes out after the loop, with the late reports.
                truncated = true;
                finishReason = 'length';
                return false;
              }
              if (event.type === 'tool_call') {
                answer.addToolCall(event);
                out.push(event);
                break;
              }
              answer.add(text);
              deltas += 1;
              out.push(event);
              const now = performance.now();
              if (now - lastProgress >= PROGRESS_INTERVAL_MS) {
                lastProgress = now;
                out.push(generating(deltas));
              }
              break;
            }
            case 'finish':
              finishReason = event.reason;
              if (event.usage) usage = { input_tokens: event.usage.inputTokens, output_tokens: event.usage.outputTokens };
              break;
            default:
              assertNever(event);
          }
        }
        if (out.length === 0) return true;
        const taken = emit(out);
        out = [];
        if (taken === true) return true;
        if (taken === false) {
          stopped = true;
          return false;
        }
        return taken.then((more) => {
          stopped = !more;
          return more;
        });
      };
      await readBatches(
        stream,
        // An upstream faster than its reader is read from buffers without waiting for I/O: let
        // the event loop turn every few milliseconds so other requests are not held.
        (batch) => (loopBusyFor(LOOP_SHARE_MS) ? nextTurn().then(() => map(batch)) : map(batch)),
      );
      if (stopped) return undefined;
      answered = candidate;
      deps.cooldowns.succeeded(candidate.model.id);
      deps.onAttempt?.(candidate.model.id, 'ok', attempts.length > 0);
      break;
    } catch (error) {
      if (!letsFallbackTry(error) || signal.aborted) throw error;
      deps.cooldowns.failed(candidate.model);
      deps.onAttempt?.(candidate.model.id, 'failed', false);
      // Once any part of the answer came, or nothing is left to try, the failure is the caller's.
      if (started || position === tried.length - 1) throw error;
      attempts.push({ model: candidate.model.id, error_code: error.code });
    }
  }
  if (!generatingReported) out.push(generating(0));
  // What a batch cut short by the bounds produced, and the stage's late report.
  if (out.length > 0 && !(await emit(out))) return undefined;
  usage ??= {
    input_tokens: estimateTokens(messages.map((message) => message.content).join('\n')),
    output_tokens: estimateTokensFromChars(answer.chars),
  };
  return { finishReason, usage, truncated, model: (answered ?? { model: job.model }).model.id, attempts };
}
