/** Wires the identity, quota and session services over one storage environment (server and CLI alike). */
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import { createQuotaService, type Clock, type QuotaServiceWithStatus } from '../quota/service.js';
import { LmdbApiKeyStore } from '../store/lmdb-keys.js';
import { LmdbQuotaCounters } from '../store/lmdb-quota.js';
import { LmdbSessionStore } from '../store/lmdb-sessions.js';
import { LmdbUserStore } from '../store/lmdb-users.js';
import type { LmdbStorage } from '../store/lmdb.js';
import type { SessionStore } from '../store/types.js';
import { createAuthenticator } from './authenticator.js';
import type { ApiKeyStore, Authenticator, UserStore } from './types.js';

export interface IdentityServices {
  auth: Authenticator;
  quota: QuotaServiceWithStatus;
  sessions: SessionStore;
  users: UserStore;
  apiKeys: ApiKeyStore;
}

/** Builds auth, quota, sessions, users and keys on the given storage. */
export function createIdentityServices(
  config: Readonly<Config>,
  storage: LmdbStorage,
  metrics: Pick<Metrics, 'quotaRefusals'>,
  clock: Clock = Date.now,
): IdentityServices {
  const users = new LmdbUserStore(storage);
  const apiKeys = new LmdbApiKeyStore(storage);
  return {
    auth: createAuthenticator(config, users, apiKeys, clock),
    quota: createQuotaService(config, new LmdbQuotaCounters(storage), metrics, clock),
    sessions: new LmdbSessionStore(storage, config.sessionMaxTurns),
    users,
    apiKeys,
  };
}
