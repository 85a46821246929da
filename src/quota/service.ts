/**
 * Plans and exact quotas. Windows are fixed and aligned to the Unix epoch (a daily plan resets at
 * 00:00 UTC); `reset` is the end of the current window. The take itself is one storage transaction.
 */
import type { Caller } from '../auth/types.js';
import type { QuotaStamp } from '../chat/events.js';
import type { Config, PlanConfig } from '../config.js';
import { ApiError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { Operation, QuotaCounterStore, QuotaReservation, QuotaService, QuotaStatus, QuotaSubject } from './types.js';

/** A source of "now" in epoch milliseconds; injectable so tests can move across a window edge. */
export type Clock = () => number;

/** The window containing `now` for a plan: [start, end) in epoch ms. */
export function windowOf(plan: PlanConfig, now: number): { start: number; end: number } {
  const length = plan.window_seconds * 1000;
  const start = Math.floor(now / length) * length;
  return { start, end: start + length };
}

/** The quota service with status lookups for the quota route. */
export interface QuotaServiceWithStatus extends QuotaService {
  /** The subject's standing in the current window (no quota is taken). */
  status(subject: QuotaSubject): QuotaStatus;
  /** The plan's settings, falling back to the default plan for a name no longer configured. */
  plan(name: string): { name: string; config: PlanConfig };
}

/** Builds the quota service over counters in storage. */
export function createQuotaService(
  config: Pick<Readonly<Config>, 'plans' | 'defaultPlan' | 'costs'>,
  counters: QuotaCounterStore,
  metrics: Pick<Metrics, 'quotaRefusals'>,
  clock: Clock = Date.now,
): QuotaServiceWithStatus {
  const plan = (name: string) => {
    const found = config.plans[name];
    if (found) return { name, config: found };
    return { name: config.defaultPlan, config: config.plans[config.defaultPlan]! };
  };

  const stamp = (planName: string, limit: number, used: number, end: number, now: number): QuotaStamp => ({
    plan: planName,
    limit,
    remaining: Math.max(0, limit - used),
    reset: new Date(end).toISOString(),
    resetSeconds: Math.max(1, Math.ceil((end - now) / 1000)),
  });

  const headers = (value: QuotaStamp): Record<string, string> => ({
    'RateLimit-Limit': String(value.limit),
    'RateLimit-Remaining': String(value.remaining),
    'RateLimit-Reset': String(value.resetSeconds),
  });

  return {
    plan,
    headers,

    async reserve(caller: Caller, operation: Operation): Promise<QuotaReservation> {
      const { name, config: planConfig } = plan(caller.plan);
      const cost = config.costs[operation];
      const now = clock();
      const window = windowOf(planConfig, now);
      const taken = await counters.take(caller.id, window.start, planConfig.quota, cost);
      const result = stamp(name, planConfig.quota, taken.used, window.end, now);
      if (!taken.ok) {
        metrics.quotaRefusals.inc({ plan: name });
        const message =
          cost > planConfig.quota
            ? `This ${operation} request costs ${cost}, more than the ${planConfig.quota} the "${name}" plan allows per window.`
            : `The "${name}" plan quota is used up (${operation} costs ${cost}, ${result.remaining} left); it resets at ${result.reset}.`;
        throw new ApiError('quota_exceeded', message, {
          headers: { ...headers(result), 'Retry-After': String(result.resetSeconds) },
        });
      }
      let refunded = false;
      return {
        stamp: result,
        refund: async () => {
          if (refunded) return;
          refunded = true;
          await counters.giveBack(caller.id, window.start, cost);
        },
      };
    },

    status(subject: QuotaSubject): QuotaStatus {
      const { name, config: planConfig } = plan(subject.plan);
      const now = clock();
      const window = windowOf(planConfig, now);
      const used = Math.min(planConfig.quota, counters.used(subject.id, window.start));
      return {
        plan: name,
        limit: planConfig.quota,
        used,
        remaining: planConfig.quota - used,
        reset: new Date(window.end).toISOString(),
        window_seconds: planConfig.window_seconds,
      };
    },
  };
}
