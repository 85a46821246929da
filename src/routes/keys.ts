/** A caller's own API keys: POST/GET /api/keys, DELETE /api/keys/{key_id}. */
import * as v from 'valibot';
import { createKey, listKeys } from '../auth/key-service.js';
import { isKeyId } from '../auth/keys.js';
import type { Caller } from '../domain/types.js';
import { KeyNameSchema, parseWith } from '../auth/validation.js';
import { ApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import { NO_STORE } from './headers.js';
import type { Services } from '../services.js';
import { identify } from './admit.js';

export const CreateKeyBody = v.optional(v.strictObject({ name: v.optional(KeyNameSchema) }));

/** The caller, who must be a user with a key: anonymous callers have no keys, the admin uses the admin API. */
async function keyOwner(services: Services, context: HttpContext): Promise<Extract<Caller, { kind: 'user' }>> {
  const caller = await identify(services, context);
  if (caller.kind === 'user') return caller;
  if (caller.kind === 'anonymous') {
    throw new ApiError('unauthorized', 'Managing keys needs an API key: send "Authorization: Bearer <API key>".', {
      headers: { 'WWW-Authenticate': 'Bearer realm="colloquy"' },
    });
  }
  throw new ApiError('forbidden', 'The admin token has no keys of its own; use /api/admin/users/{user_id}/keys.');
}

/** The caller key routes: create, list and revoke one's own keys. */
export function keyRoutes(services: Services): Route[] {
  return [
    {
      method: 'POST',
      path: '/api/keys',
      handler: async (context) => {
        const caller = await keyOwner(services, context);
        const body = parseWith(CreateKeyBody, await context.readJson({ optional: true }));
        const created = await createKey(services.apiKeys, caller.id, body?.name);
        context.json(201, created, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/keys',
      handler: async (context) => {
        const caller = await keyOwner(services, context);
        context.json(200, { keys: await listKeys(services.apiKeys, caller.id) }, NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: '/api/keys/:key_id',
      handler: async (context) => {
        const caller = await keyOwner(services, context);
        const keyId = context.request.params.key_id ?? '';
        // Another user's key id answers exactly like a missing one.
        if (!isKeyId(keyId) || !(await services.apiKeys.revoke(caller.id, keyId))) {
          throw new ApiError('not_found', 'No key with this id.');
        }
        context.json(200, { key_id: keyId, revoked: true }, NO_STORE);
      },
    },
  ];
}
