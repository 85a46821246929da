/**
 * GET /api/usage: the caller's usage totals over a period, grouped by day, model or key; the admin
 * reads anyone's (`user_id`) or everyone's. Reading it takes no quota.
 */
import * as v from 'valibot';
import { ApiError } from '../errors.js';
import type { Route } from '../http/types.js';
import { type UsageGrouping, usagePeriod } from '../quota/usage.js';
import type { Services } from '../services.js';
import { parseOrThrow } from '../validation.js';
import { identify } from './admit.js';
import { NO_STORE } from './headers.js';

const Instant = v.pipe(
  v.string(),
  v.check(
    (text) => /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(text) && !Number.isNaN(Date.parse(text)),
    'must be a date (2026-11-01) or an ISO 8601 time',
  ),
);

/** The query string, validated: every field optional. */
export const UsageQuery = v.strictObject({
  from: v.optional(Instant),
  to: v.optional(Instant),
  group_by: v.optional(v.picklist(['day', 'model', 'key'], 'must be "day", "model" or "key"')),
  user_id: v.optional(v.pipe(v.string(), v.regex(/^(?:[A-Za-z0-9_.-]{1,64}|anon:[0-9A-Fa-f:.]{1,45})$/, 'must be a user id'))),
});

/** The usage route. */
export function usageRoutes(services: Services): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/usage',
      handler: async (context) => {
        const caller = await identify(services, context);
        const query = parseOrThrow(UsageQuery, Object.fromEntries(context.request.query), 'The usage query is not valid.');
        let subject: string | undefined = caller.id;
        if (caller.kind === 'admin') subject = query.user_id;
        else if (query.user_id !== undefined && query.user_id !== caller.id) {
          throw new ApiError('forbidden', 'You can only read your own usage (leave out user_id).');
        }
        const { from, to } = usagePeriod(query, services.usage.now());
        const groupBy: UsageGrouping = query.group_by ?? 'day';
        const { total, groups, truncated } = await services.usage.totals(from, to, subject, groupBy);
        context.json(
          200,
          {
            user_id: subject ?? null,
            from: new Date(from).toISOString(),
            to: new Date(to).toISOString(),
            group_by: groupBy,
            total: { requests: total.requests, input_tokens: total.input_tokens, output_tokens: total.output_tokens, errors: total.errors },
            groups,
            ...(truncated ? { truncated: true } : {}),
          },
          NO_STORE,
        );
      },
    },
  ];
}
