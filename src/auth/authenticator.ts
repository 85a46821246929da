/**
 * Resolves who is calling. A Bearer token is either the admin token or an API key; anything else
 * sent in Authorization is refused, never treated as anonymous. No header means anonymous,
 * identified by client address, unless the deployment requires keys.
 */
import type { Config } from '../config/index.js';
import type { Caller, Clock } from '../domain/types.js';
import { ApiError } from '../errors.js';
import type { ApiKeyStore, UserStore } from '../store/types.js';
import { parseKey, secretMatches, tokensEqual } from './keys.js';
import type { Authenticator, Credentials } from './types.js';

const REALM = 'Bearer realm="colloquy"';
const INVALID_TOKEN = `${REALM}, error="invalid_token"`;
/** last_used is written at most this often per key, so a busy key does not cost a write per request. */
const TOUCH_INTERVAL_MS = 60_000;
const TOUCH_MEMORY = 10_000;

/** The anonymous caller id for a client address; the colon keeps it apart from every user id. */
function anonymousId(clientAddress: string): string {
  return `anon:${clientAddress}`;
}

function unauthorized(message: string, challenge: string): ApiError {
  return new ApiError('unauthorized', message, { headers: { 'WWW-Authenticate': challenge } });
}

/** The bearer token of an Authorization header: undefined when there is none; throws when it is malformed. */
function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(header);
  if (!match) throw unauthorized('The Authorization header must be "Bearer <API key>".', INVALID_TOKEN);
  return match[1]!;
}

/** Builds the authenticator over the user and key stores. */
export function createAuthenticator(
  config: Pick<Readonly<Config>, 'adminToken' | 'authRequired' | 'anonymousPlan' | 'defaultPlan' | 'plans'>,
  users: UserStore,
  keys: ApiKeyStore,
  clock: Clock = Date.now,
): Authenticator {
  const touched = new Map<string, number>();

  const adminCaller = (): Caller => ({ kind: 'admin', id: 'admin', plan: config.defaultPlan });

  /** The user behind an API key, or undefined for an unknown, revoked or wrong key. */
  const userForKey = async (token: string): Promise<Caller | undefined> => {
    const parsed = parseKey(token);
    if (!parsed) return undefined;
    const record = await keys.get(parsed.keyId);
    if (!record || !secretMatches(parsed.secret, record.hash) || record.revoked_at !== undefined) return undefined;
    const user = await users.get(record.user_id);
    if (!user) return undefined;
    const now = clock();
    const last = touched.get(record.key_id);
    if (last === undefined || now - last >= TOUCH_INTERVAL_MS) {
      if (touched.size >= TOUCH_MEMORY) touched.clear();
      touched.set(record.key_id, now);
      keys.touch(record.key_id, new Date(now).toISOString());
    }
    // A plan removed from the config falls back to the default plan rather than locking the user out.
    const plan = config.plans[user.plan] ? user.plan : config.defaultPlan;
    return { kind: 'user', id: user.user_id, plan, keyId: record.key_id };
  };

  return {
    async caller(credentials: Credentials): Promise<Caller> {
      const token = bearerToken(credentials.authorization);
      if (token === undefined) {
        if (config.authRequired) throw unauthorized('This server requires an API key: send "Authorization: Bearer <API key>".', REALM);
        return { kind: 'anonymous', id: anonymousId(credentials.clientAddress), plan: config.anonymousPlan };
      }
      if (config.adminToken !== undefined && tokensEqual(token, config.adminToken)) return adminCaller();
      const user = await userForKey(token);
      if (!user) throw unauthorized('The API key is not valid or has been revoked.', INVALID_TOKEN);
      return user;
    },

    async admin(credentials: Credentials): Promise<Caller> {
      // Without an admin token the admin API does not exist at all.
      if (config.adminToken === undefined) throw new ApiError('not_found');
      const token = bearerToken(credentials.authorization);
      if (token === undefined) throw unauthorized('The admin API requires "Authorization: Bearer <admin token>".', REALM);
      if (tokensEqual(token, config.adminToken)) return adminCaller();
      if (await userForKey(token)) throw new ApiError('forbidden', 'This route is for administrators only.');
      throw unauthorized('The admin token is not valid.', INVALID_TOKEN);
    },
  };
}
