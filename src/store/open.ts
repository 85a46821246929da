/**
 * Opens the configured storage engine and its stores: embedded LMDB in the data directory (the
 * default), or a Redis shared by many nodes (`COLLOQUY_REDIS_URL`, `storage.kind: "redis"`).
 * The server and the command line both open storage here, so they always agree on where state is.
 */
import type { StorageConfig } from '../config/index.js';
import type { Logger } from '../logger.js';
import { LmdbApiKeyStore } from './lmdb-keys.js';
import { LmdbQuotaCounters } from './lmdb-quota.js';
import { LmdbSessionStore } from './lmdb-sessions.js';
import { LmdbStreamLog } from './lmdb-stream-log.js';
import { LmdbUsageStore } from './lmdb-usage.js';
import { LmdbUserStore } from './lmdb-users.js';
import { LmdbStorage } from './lmdb.js';
import { SharedRecordCache } from './redis-cache.js';
import { RedisApiKeyStore } from './redis-keys.js';
import { RedisQuotaCounters } from './redis-quota.js';
import { RedisSessionStore } from './redis-sessions.js';
import { RedisStreamLog } from './redis-stream-log.js';
import { RedisUsageStore } from './redis-usage.js';
import { RedisUserStore } from './redis-users.js';
import type { RedisStorage } from './redis.js';
import type {
  ApiKeyRecord,
  ApiKeyStore,
  CounterRecord,
  ExportedSession,
  QuotaCounterStore,
  RecordTransfer,
  SessionStore,
  StreamLogStore,
  UsageRecord,
  UsageStore,
  UserRecord,
  UserStore,
} from './types.js';

/** One engine with every store the service keeps on it (each can export and import its records). */
export interface OpenedStorage {
  storage: LmdbStorage | RedisStorage;
  users: UserStore & RecordTransfer<UserRecord>;
  apiKeys: ApiKeyStore & RecordTransfer<ApiKeyRecord>;
  counters: QuotaCounterStore & RecordTransfer<CounterRecord>;
  sessions: SessionStore & RecordTransfer<ExportedSession>;
  usage: UsageStore & RecordTransfer<UsageRecord>;
  /** The logs of resumable streams (short-lived: not copied between engines). */
  streamLog: StreamLogStore;
}

/** What the stores are bounded by (a config has it all). */
export interface StoreLimits {
  sessionMaxTurns: number;
  /** Characters of decoded turns the LMDB session store keeps per process. */
  sessionCacheChars: number;
  resumable: { maxBytes: number; ttlSeconds: number };
}

/** The stores of an engine already open. */
/** `clock`: a test's clock for quota windows (Redis otherwise uses its own TIME). */
export function storesOn(storage: LmdbStorage | RedisStorage, limits: StoreLimits, clock?: () => number): OpenedStorage {
  const { sessionMaxTurns, sessionCacheChars, resumable } = limits;
  if (storage.engine === 'redis') {
    const cache = new SharedRecordCache(storage);
    return {
      storage,
      users: new RedisUserStore(storage, cache),
      apiKeys: new RedisApiKeyStore(storage, cache),
      counters: new RedisQuotaCounters(storage, clock),
      sessions: new RedisSessionStore(storage, sessionMaxTurns),
      usage: new RedisUsageStore(storage),
      streamLog: new RedisStreamLog(storage, { maxBytes: resumable.maxBytes, ttlMs: resumable.ttlSeconds * 1000 }),
    };
  }
  return {
    storage,
    users: new LmdbUserStore(storage),
    apiKeys: new LmdbApiKeyStore(storage),
    counters: new LmdbQuotaCounters(storage),
    sessions: new LmdbSessionStore(storage, sessionMaxTurns, sessionCacheChars),
    usage: new LmdbUsageStore(storage),
    streamLog: new LmdbStreamLog(storage, resumable.maxBytes),
  };
}

/** Opens the engine `config` names (LMDB at `dataDir` by default). */
export async function openStorage(
  config: { storage: StorageConfig; dataDir: string },
  logger?: Pick<Logger, 'warn' | 'info'>,
): Promise<LmdbStorage | RedisStorage> {
  if (config.storage.kind === 'lmdb') return new LmdbStorage(config.dataDir);
  // The Redis client (about 22 MiB and 100 ms of start-up per process) is loaded only when it is the engine.
  const { RedisStorage } = await import('./redis.js');
  return RedisStorage.open({
    url: config.storage.url,
    keyPrefix: config.storage.keyPrefix,
    commandTimeoutMs: config.storage.commandTimeoutMs,
    onStateChange: (state, detail) => {
      if (state === 'lost')
        logger?.warn({ storage: 'redis', detail }, 'storage connection lost: requests that need it get 503 until it returns');
      else logger?.info({ storage: 'redis' }, 'storage connection ready');
    },
  });
}
