/**
 * Plans and exact quotas. Windows are fixed and aligned to the Unix epoch (a daily plan resets at
 * 00:00 UTC); `reset` is the end of the current window. The take itself is one storage transaction.
 */
import type { Config, PlanConfig } from '../config/index.js';
import type { Caller, Clock, Operation, QuotaReservation, QuotaStamp } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { QuotaCounterStore } from '../store/types.js';
import type { QuotaService, QuotaStatus, QuotaSubject } from './types.js';

/** A refusal for quota: the code is `quota_exceeded`; the stamp says when the window resets. */
export class QuotaExceeded extends ApiError {
  constructor(
    message: string,
    readonly stamp: QuotaStamp,
  ) {
    super('quota_exceeded', message);
  }
}

/** The window containing `now` for a plan: [start, end) in epoch ms. */
function windowOf(plan: PlanConfig, now: number): { start: number; end: number } {
  const length = plan.window_seconds * 1000;
  const start = Math.floor(now / length) * length;
  return { start, end: start + length };
}

/** The quota service with status lookups for the quota route. */
export interface QuotaServiceWithStatus extends QuotaService {
  /** The subject's standing in the current window (no quota is taken). */
  status(subject: QuotaSubject): Promise<QuotaStatus>;
  /** The plan's settings, falling back to the default plan for a name no longer configured. */
  plan(name: string): { name: string; config: PlanConfig };
}

/** Builds the quota service over counters in storage. */
export function createQuotaService(
  config: Pick<Readonly<Config>, 'plans' | 'defaultPlan' | 'costs'>,
  counters: QuotaCounterStore,
  clock: Clock = Date.now,
): QuotaServiceWithStatus {
  const plan = (name: string) => {
    const found = config.plans[name];
    if (found) return { name, config: found };
    return { name: config.defaultPlan, config: config.plans[config.defaultPlan]! };
  };

  // A window's end is the same for every request in it: its text is formatted once.
  let lastEnd = Number.NaN;
  let lastReset = '';
  const resetText = (end: number): string => {
    if (end !== lastEnd) {
      lastReset = new Date(end).toISOString();
      lastEnd = end;
    }
    return lastReset;
  };

  const stamp = (planName: string, limit: number, used: number, end: number, now: number): QuotaStamp => ({
    plan: planName,
    limit,
    remaining: Math.max(0, limit - used),
    reset: resetText(end),
    resetSeconds: Math.max(1, Math.ceil((end - now) / 1000)),
  });

  const tokenStamp = (limit: number, used: number, end: number, now: number): QuotaStamp['tokens'] => ({
    limit,
    remaining: Math.max(0, limit - used),
    reset: new Date(end).toISOString(),
    resetSeconds: Math.max(1, Math.ceil((end - now) / 1000)),
  });

  const tokenStatus = async (subjectId: string, budget: { quota: number; window_seconds: number }, now: number) => {
    const length = budget.window_seconds * 1000;
    const tokenWindow = windowOf({ quota: budget.quota, window_seconds: budget.window_seconds }, now);
    const { used, windowStart } = await counters.tokensUsed(subjectId, { start: tokenWindow.start, lengthMs: length });
    return {
      limit: budget.quota,
      used,
      remaining: Math.max(0, budget.quota - used),
      reset: new Date(windowStart + length).toISOString(),
      window_seconds: budget.window_seconds,
    };
  };

  return {
    plan,

    async reserve(caller: Caller, operation: Operation, tokenEstimate?: number): Promise<QuotaReservation> {
      const { name, config: planConfig } = plan(caller.plan);
      const cost = config.costs[operation];
      const now = clock();
      const length = planConfig.window_seconds * 1000;
      // The token budget counts only operations that send tokens to a model (chat and search).
      const budget = planConfig.tokens && tokenEstimate !== undefined ? planConfig.tokens : undefined;
      const tokenLength = budget ? budget.window_seconds * 1000 : 0;
      const estimate = Math.max(0, Math.ceil(tokenEstimate ?? 0));
      const taken = await counters.take(
        caller.id,
        { start: windowOf(planConfig, now).start, lengthMs: length },
        planConfig.quota,
        cost,
        budget
          ? {
              window: { start: windowOf({ quota: budget.quota, window_seconds: budget.window_seconds }, now).start, lengthMs: tokenLength },
              limit: budget.quota,
              cost: estimate,
            }
          : undefined,
      );
      // The windows the storage counted in (a shared engine places them by its own clock).
      const window = { start: taken.windowStart, end: taken.windowStart + length };
      const tokenWindow =
        budget && taken.tokenWindowStart !== undefined
          ? { start: taken.tokenWindowStart, end: taken.tokenWindowStart + tokenLength }
          : undefined;
      const withTokens = (base: QuotaStamp, tokensUsed: number | undefined, at: number): QuotaStamp =>
        budget && tokenWindow && tokensUsed !== undefined
          ? { ...base, tokens: tokenStamp(budget.quota, tokensUsed, tokenWindow.end, at) }
          : base;
      let result = withTokens(stamp(name, planConfig.quota, taken.used, window.end, now), taken.tokensUsed, now);
      if (!budget && planConfig.tokens) {
        // An operation that sends no tokens (images, embeddings) still reports the plan's token standing.
        const tokens = await tokenStatus(caller.id, planConfig.tokens, now);
        result = { ...result, tokens: tokenStamp(tokens.limit, tokens.used, Date.parse(tokens.reset), now) };
      }
      if (!taken.ok) {
        let message: string;
        if (taken.refusedBy === 'tokens' && budget && result.tokens) {
          message =
            estimate > budget.quota
              ? `This request may use ${estimate} tokens (its prompt and max_tokens), more than the ${budget.quota} tokens the "${name}" plan allows per window.`
              : `The "${name}" plan's token budget cannot cover this request (it may use ${estimate} tokens, ${result.tokens.remaining} left); it resets at ${result.tokens.reset}. A smaller max_tokens may fit.`;
        } else {
          message =
            cost > planConfig.quota
              ? `This ${operation} request costs ${cost}, more than the ${planConfig.quota} the "${name}" plan allows per window.`
              : `The "${name}" plan quota is used up (${operation} costs ${cost}, ${result.remaining} left); it resets at ${result.reset}.`;
        }
        // Retry-After and the RateLimit headers follow the dimension that refused.
        const refusal = taken.refusedBy === 'tokens' && result.tokens ? { ...result, resetSeconds: result.tokens.resetSeconds } : result;
        throw new QuotaExceeded(message, refusal);
      }
      let refunded: Promise<QuotaStamp> | undefined;
      let settled: Promise<QuotaStamp> | undefined;
      return {
        stamp: result,
        durable: taken.durable,
        refund: () => {
          refunded ??= (async () => {
            const used = await counters.giveBack(caller.id, window.start, cost);
            const tokensUsed = tokenWindow && !settled ? await counters.adjustTokens(caller.id, tokenWindow.start, -estimate) : undefined;
            if (used === undefined) return result;
            return withTokens(stamp(name, planConfig.quota, used, window.end, clock()), tokensUsed, clock());
          })();
          return refunded;
        },
        settle: (tokens: number) => {
          settled ??= (async () => {
            if (!tokenWindow || refunded) return result;
            const tokensUsed = await counters.adjustTokens(caller.id, tokenWindow.start, Math.max(0, Math.ceil(tokens)) - estimate);
            return withTokens(result, tokensUsed, clock());
          })();
          return settled;
        },
      };
    },

    async status(subject: QuotaSubject): Promise<QuotaStatus> {
      const { name, config: planConfig } = plan(subject.plan);
      const now = clock();
      const length = planConfig.window_seconds * 1000;
      const counted = await counters.used(subject.id, { start: windowOf(planConfig, now).start, lengthMs: length });
      const used = Math.min(planConfig.quota, counted.used);
      return {
        plan: name,
        limit: planConfig.quota,
        used,
        remaining: planConfig.quota - used,
        reset: new Date(counted.windowStart + length).toISOString(),
        window_seconds: planConfig.window_seconds,
        ...(planConfig.tokens ? { tokens: await tokenStatus(subject.id, planConfig.tokens, now) } : {}),
      };
    },
  };
}
