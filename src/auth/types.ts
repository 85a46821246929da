/** Resolving who is calling; the caller type itself is shared vocabulary (src/domain). */
import type { Caller } from '../domain/types.js';

/** What authentication reads of a request: copied from it at the edge, so auth never sees HTTP. */
export interface Credentials {
  /** The Authorization header as sent, if any. */
  authorization: string | undefined;
  /** The client address (after trust_proxy), identifying anonymous callers; read only for them. */
  readonly clientAddress: string;
}

export interface Authenticator {
  /**
   * Resolves the caller. Throws ApiError `unauthorized` (with WWW-Authenticate) for a malformed
   * header or an unknown/revoked key, and when keys are required and none was sent.
   */
  caller(credentials: Credentials): Promise<Caller>;
  /** Resolves an admin (COLLOQUY_ADMIN_TOKEN); throws not_found when admin is disabled, unauthorized/forbidden otherwise. */
  admin(credentials: Credentials): Promise<Caller>;
}
