/** Opens storage for one CLI command: the same engine and stores the server uses. */
import { createIdentityServices, type IdentityServices } from '../identity.js';
import { loadConfig, type Config } from '../config/index.js';
import type { LmdbStorage } from '../store/lmdb.js';
import { openStorage } from '../store/open.js';
import type { RedisStorage } from '../store/redis.js';

export interface DataDir extends IdentityServices {
  config: Readonly<Config>;
  /** The configured engine (LMDB in the data directory, or Redis with COLLOQUY_REDIS_URL). */
  storage: LmdbStorage | RedisStorage;
}

/** Runs `action` with the stores open, then flushes and closes them whatever happens. */
export async function withDataDir<T>(action: (data: DataDir) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const storage = await openStorage(config);
  try {
    return await action({ config, storage, ...createIdentityServices(config, storage) });
  } finally {
    await storage.close();
  }
}
