/**
 * The admin API (COLLOQUY_ADMIN_TOKEN): users and their plans and keys. Every handler checks the
 * admin token before reading anything else, so without it nothing about users can be probed.
 */
import * as v from 'valibot';
import { createKey, listKeys } from '../auth/key-service.js';
import { isKeyId } from '../auth/keys.js';
import type { UserRecord } from '../store/types.js';
import { KeyNameSchema, parseWith, USER_ID_PATTERN, UserIdSchema } from '../auth/validation.js';
import { ApiError } from '../errors.js';
import type { Route } from '../http/types.js';
import { NO_STORE } from './headers.js';
import type { Services } from '../services.js';
import { idParam, nextAfter, pageQuery } from './paging.js';
import { requireAdmin } from './admit.js';

function userView(user: UserRecord): { user_id: string; plan: string; created: string } {
  return { user_id: user.user_id, plan: user.plan, created: user.created };
}

/** The admin request bodies; a plan must be one of the configured ones. */
export function adminBodySchemas(planNames: string[]) {
  const PlanSchema = v.picklist(planNames, `must be one of the configured plans: ${planNames.join(', ')}`);
  return {
    CreateUserBody: v.strictObject({ user_id: UserIdSchema, plan: v.optional(PlanSchema) }),
    PatchUserBody: v.strictObject({ plan: PlanSchema }),
    CreateKeyBody: v.optional(v.strictObject({ name: v.optional(KeyNameSchema) })),
  };
}

/** The admin route group: users, plans and keys, behind COLLOQUY_ADMIN_TOKEN. */
export function adminRoutes(services: Services): Route[] {
  const { CreateUserBody, PatchUserBody, CreateKeyBody } = adminBodySchemas(Object.keys(services.config.plans));

  const existingUser = async (userId: string | undefined): Promise<UserRecord> => {
    const user = await services.users.get(
      idParam(userId, 'user_id', USER_ID_PATTERN, 'a user id (1-64 characters of A-Z, a-z, 0-9, "_", "." or "-")'),
    );
    if (!user) throw new ApiError('not_found', 'No user with this id.');
    return user;
  };

  return [
    {
      method: 'POST',
      path: '/api/admin/users',
      handler: async (context) => {
        await requireAdmin(services, context);
        const body = parseWith(CreateUserBody, await context.readJson());
        const plan = body.plan ?? services.config.defaultPlan;
        if (!(await services.users.create(body.user_id, plan))) {
          throw new ApiError('conflict', `The user "${body.user_id}" already exists.`);
        }
        context.json(201, userView(await existingUser(body.user_id)), NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/admin/users',
      handler: async (context) => {
        await requireAdmin(services, context);
        const { limit, after } = pageQuery(context.request.query, USER_ID_PATTERN);
        const users = await services.users.list({ limit, after });
        context.json(200, { users: users.map(userView), ...nextAfter(users, limit, (user) => user.user_id) }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/admin/plans',
      handler: async (context) => {
        await requireAdmin(services, context);
        const plans = Object.entries(services.config.plans).map(([name, plan]) => ({
          name,
          quota: plan.quota,
          window_seconds: plan.window_seconds,
          ...(plan.max_parallel === undefined ? {} : { max_parallel: plan.max_parallel }),
        }));
        context.json(200, { default_plan: services.config.defaultPlan, anonymous_plan: services.config.anonymousPlan, plans }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/admin/users/:user_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        context.json(200, userView(await existingUser(context.request.params.user_id)), NO_STORE);
      },
    },
    {
      method: 'PATCH',
      path: '/api/admin/users/:user_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        const body = parseWith(PatchUserBody, await context.readJson());
        const updated = await services.users.setPlan(
          idParam(context.request.params.user_id, 'user_id', USER_ID_PATTERN, 'a user id'),
          body.plan,
        );
        if (!updated) throw new ApiError('not_found', 'No user with this id.');
        context.json(200, userView(updated), NO_STORE);
      },
    },
    {
      method: 'POST',
      path: '/api/admin/users/:user_id/keys',
      handler: async (context) => {
        await requireAdmin(services, context);
        const user = await existingUser(context.request.params.user_id);
        const body = parseWith(CreateKeyBody, await context.readJson({ optional: true }));
        const created = await createKey(services.apiKeys, user.user_id, body?.name);
        context.json(201, { user_id: user.user_id, ...created }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/admin/users/:user_id/keys',
      handler: async (context) => {
        await requireAdmin(services, context);
        const user = await existingUser(context.request.params.user_id);
        context.json(200, { user_id: user.user_id, keys: await listKeys(services.apiKeys, user.user_id) }, NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: '/api/admin/users/:user_id/keys/:key_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        const user = await existingUser(context.request.params.user_id);
        const keyId = context.request.params.key_id ?? '';
        if (!isKeyId(keyId) || !(await services.apiKeys.revoke(user.user_id, keyId))) {
          throw new ApiError('not_found', 'No key with this id for this user.');
        }
        context.json(200, { user_id: user.user_id, key_id: keyId, revoked: true }, NO_STORE);
      },
    },
  ];
}
