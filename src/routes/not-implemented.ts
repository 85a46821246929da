/** Routes of the contract whose features have not landed yet: they answer 501 `not_implemented`. */
import { ApiError } from '../errors.js';
import type { HttpMethod, Route } from '../http/types.js';

const PENDING: Array<[HttpMethod, string]> = [
  ['POST', '/api/chat'],
  ['POST', '/api/chat/stream'],
  ['POST', '/api/chat/progress'],
  ['POST', '/api/chat/search'],
  ['POST', '/api/chat/image'],
  ['GET', '/api/models'],
  ['GET', '/api/chat/session/:id'],
  ['DELETE', '/api/chat/session/:id'],
  ['GET', '/api/chat/quota/:user_id'],
  ['GET', '/api/chat/rag/stats'],
  ['POST', '/api/keys'],
  ['GET', '/api/keys'],
  ['DELETE', '/api/keys/:key_id'],
  ['POST', '/api/admin/users'],
  ['PATCH', '/api/admin/users/:user_id'],
  ['POST', '/api/admin/users/:user_id/keys'],
  ['POST', '/api/rag/documents'],
  ['GET', '/api/rag/documents'],
  ['DELETE', '/api/rag/documents/:document_id'],
];

/** 501 handlers for every pending route not already provided by `implemented`. */
export function notImplementedRoutes(implemented: readonly Route[]): Route[] {
  const taken = new Set(implemented.map((route) => `${route.method} ${route.path.replace(/\/$/, '')}`));
  return PENDING.filter(([method, path]) => !taken.has(`${method} ${path}`)).map(([method, path]) => ({
    method,
    path,
    handler: () => {
      throw new ApiError('not_implemented', `${method} ${path} is not implemented yet.`);
    },
  }));
}
