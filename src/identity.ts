/** Wires the identity, quota and session services over one storage environment (server and CLI alike). */
import { createAuthenticator } from './auth/authenticator.js';
import type { Authenticator } from './auth/types.js';
import type { Config } from './config/index.js';
import type { Clock } from './domain/types.js';
import { createQuotaService, type QuotaServiceWithStatus } from './quota/service.js';
import type { LmdbStorage } from './store/lmdb.js';
import { storesOn } from './store/open.js';
import type { RedisStorage } from './store/redis.js';
import type { ApiKeyStore, QuotaCounterStore, SessionStore, StreamLogStore, UsageStore, UserStore } from './store/types.js';

export interface IdentityServices {
  auth: Authenticator;
  quota: QuotaServiceWithStatus;
  sessions: SessionStore;
  users: UserStore;
  apiKeys: ApiKeyStore;
  /** Where the usage history is kept (the same engine). */
  usageStore: UsageStore;
  /** The logs of resumable streams (the same engine). */
  streamLog: StreamLogStore;
}

/** Builds auth, quota, sessions, users and keys on the given storage. */
export function createIdentityServices(
  config: Readonly<Config>,
  storage: LmdbStorage | RedisStorage,
  clock?: Clock,
  wrapCounters: (counters: QuotaCounterStore) => QuotaCounterStore = (counters) => counters,
): IdentityServices {
  const { users, apiKeys, counters, sessions, usage, streamLog } = storesOn(storage, config, clock);
  return {
    auth: createAuthenticator(config, users, apiKeys, clock),
    quota: createQuotaService(config, wrapCounters(counters), clock),
    sessions,
    users,
    apiKeys,
    usageStore: usage,
    streamLog,
  };
}
