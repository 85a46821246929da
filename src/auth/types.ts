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

/** A user known to the service (created by the admin API or the CLI). */
export interface UserRecord {
  user_id: string;
  plan: string;
  /** ISO 8601. */
  created: string;
}

/** A stored API key: never the key itself, only the hash of its secret. */
export interface ApiKeyRecord {
  key_id: string;
  user_id: string;
  /** SHA-256 of the secret part. */
  hash: Uint8Array;
  name: string | undefined;
  created: string;
  last_used: string | undefined;
  revoked_at: string | undefined;
}

/** What a key listing shows: everything but the hash. */
export interface ApiKeyInfo {
  key_id: string;
  prefix: string;
  name: string | null;
  created: string;
  last_used: string | null;
  revoked: boolean;
  revoked_at: string | null;
}

export interface UserStore {
  get(userId: string): UserRecord | undefined;
  /** Creates the user; false when the id is taken. */
  create(userId: string, plan: string): Promise<boolean>;
  /** Changes the plan; the updated record, or undefined when there is no such user. */
  setPlan(userId: string, plan: string): Promise<UserRecord | undefined>;
  /** Users in id order after `after`, at most `limit`. */
  list(options: { limit: number; after?: string }): UserRecord[];
}

export interface ApiKeyStore {
  /** Looked up by id (no scan). */
  get(keyId: string): ApiKeyRecord | undefined;
  /** Stores a new key for a user. */
  add(record: ApiKeyRecord): Promise<void>;
  /** A user's keys in id order, at most `limit`. */
  listForUser(userId: string, limit: number): ApiKeyRecord[];
  /** Marks a key revoked; false when it does not exist or belongs to someone else. */
  revoke(userId: string, keyId: string): Promise<boolean>;
  /** Records use of a key (throttled by the caller; best effort). */
  touch(keyId: string, at: string): void;
}
