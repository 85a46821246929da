/** Wires the identity, quota and session services over one storage environment (server and CLI alike). */
import { createAuthenticator } from './auth/authenticator.js';
import type { Authenticator } from './auth/types.js';
import type { Config } from './config/index.js';
import type { Clock } from './domain/types.js';
import { createQuotaService, type QuotaServiceWithStatus } from './quota/service.js';
import { LmdbApiKeyStore } from './store/lmdb-keys.js';
import { LmdbQuotaCounters } from './store/lmdb-quota.js';
import { LmdbSessionStore } from './store/lmdb-sessions.js';
import { LmdbUserStore } from './store/lmdb-users.js';
import type { LmdbStorage } from './store/lmdb.js';
import type { ApiKeyStore, QuotaCounterStore, SessionStore, UserStore } from './store/types.js';

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
  clock: Clock = Date.now,
  wrapCounters: (counters: QuotaCounterStore) => QuotaCounterStore = (counters) => counters,
): IdentityServices {
  const users = new LmdbUserStore(storage);
  const apiKeys = new LmdbApiKeyStore(storage);
  return {
    auth: createAuthenticator(config, users, apiKeys, clock),
    quota: createQuotaService(config, wrapCounters(new LmdbQuotaCounters(storage)), clock),
    sessions: new LmdbSessionStore(storage, config.sessionMaxTurns),
    users,
    apiKeys,
  };
}
