/** Who is calling: resolved once per request from `Authorization: Bearer`, or the client address. */
import type { HttpContext } from '../http/types.js';

export type Caller =
  | { kind: 'user'; id: string; plan: string; keyId: string }
  | { kind: 'anonymous'; id: string; plan: string }
  | { kind: 'admin'; id: 'admin'; plan: string };

export interface Authenticator {
  /**
   * Resolves the caller. Throws ApiError `unauthorized` (with WWW-Authenticate) for a malformed
   * header or an unknown/revoked key, and when keys are required and none was sent.
   */
  caller(context: HttpContext): Promise<Caller>;
  /** Resolves an admin (COLLOQUY_ADMIN_TOKEN); throws not_found when admin is disabled, unauthorized/forbidden otherwise. */
  admin(context: HttpContext): Promise<Caller>;
}
