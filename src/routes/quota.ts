/** GET /api/chat/quota/{user_id}: a caller's standing in the current window. Reading it takes no quota. */
import type { Caller } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { Route } from '../http/types.js';
import type { QuotaSubject } from '../quota/types.js';
import type { Services } from '../services.js';
import { identify } from './admit.js';
import { idParam } from './paging.js';

/** The quota lookup route. */
/** `me`, a user id, or an anonymous caller (`anon:` and an IP address). */
const QUOTA_SUBJECT = /^(?:[A-Za-z0-9_.-]{1,64}|anon:[0-9A-Fa-f:.]{1,45})$/;

export function quotaRoutes(services: Services): Route[] {
  /** Whose record the caller asked for, or a refusal: `me` and one's own id for everyone, any id for the admin. */
  const subjectFor = async (caller: Caller, requested: string): Promise<QuotaSubject> => {
    if (requested === 'me' || requested === caller.id) return { id: caller.id, plan: caller.plan };
    if (caller.kind !== 'admin') throw new ApiError('forbidden', 'You can only read your own quota (use "me").');
    if (requested.startsWith('anon:')) return { id: requested, plan: services.config.anonymousPlan };
    const user = await services.users.get(requested);
    if (!user) throw new ApiError('not_found', 'No user with this id.');
    return { id: user.user_id, plan: user.plan };
  };

  return [
    {
      method: 'GET',
      path: '/api/chat/quota/:user_id',
      handler: async (context) => {
        const caller = await identify(services, context);
        const requested = idParam(context.request.params.user_id, 'user_id', QUOTA_SUBJECT, '"me", a user id or an anonymous caller id');
        const subject = await subjectFor(caller, requested);
        const status = await services.quota.status(subject);
        context.json(200, { user_id: subject.id, ...status }, { 'Cache-Control': 'no-store' });
      },
    },
  ];
}
