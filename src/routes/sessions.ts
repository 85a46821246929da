/**
 * GET/DELETE /api/chat/session/{id} and GET /api/chat/sessions. Sessions are keyed by owner, so
 * someone else's session id answers exactly like one that never existed.
 */
import { queryInt } from '../auth/validation.js';
import { SESSION_ID_PATTERN } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { Route } from '../http/types.js';
import { NO_STORE } from './headers.js';
import type { Services } from '../services.js';
import { identify } from './admit.js';

function sessionId(value: string | undefined): string {
  if (value === undefined || !SESSION_ID_PATTERN.test(value)) {
    throw new ApiError('invalid_request', 'The request is not valid.', {
      details: [{ path: 'id', message: 'must be 1-128 characters of A-Z, a-z, 0-9, "_" or "-"' }],
    });
  }
  return value;
}

const notFound = () => new ApiError('not_found', 'No session with this id.');

/** The session routes: read, delete and list the caller's own sessions. */
export function sessionRoutes(services: Services): Route[] {
  const maxTurns = services.config.sessionMaxTurns;
  return [
    {
      method: 'GET',
      path: '/api/chat/session/:id',
      handler: async (context) => {
        const caller = await identify(services, context);
        const id = sessionId(context.request.params.id);
        const limit = queryInt(context.request.query, 'limit', maxTurns, 1, maxTurns);
        const record = await services.sessions.get(caller.id, id, limit);
        if (!record) throw notFound();
        context.json(200, record, NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: '/api/chat/session/:id',
      handler: async (context) => {
        const caller = await identify(services, context);
        const id = sessionId(context.request.params.id);
        if (!(await services.sessions.delete(caller.id, id))) throw notFound();
        context.json(200, { session_id: id, deleted: true }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/chat/sessions',
      handler: async (context) => {
        const caller = await identify(services, context);
        const limit = queryInt(context.request.query, 'limit', 50, 1, 200);
        context.json(200, { sessions: await services.sessions.list(caller.id, limit) }, NO_STORE);
      },
    },
  ];
}
