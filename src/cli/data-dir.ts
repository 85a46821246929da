/** Opens the data directory for one CLI command: the same LMDB environment and stores the server uses. */
import { createIdentityServices, type IdentityServices } from '../identity.js';
import { loadConfig, type Config } from '../config/index.js';
import { LmdbStorage } from '../store/lmdb.js';

export interface DataDir extends IdentityServices {
  config: Readonly<Config>;
  storage: LmdbStorage;
}

/** Runs `action` with the stores open, then flushes and closes them whatever happens. */
export async function withDataDir<T>(action: (data: DataDir) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const storage = new LmdbStorage(config.dataDir);
  try {
    return await action({ config, storage, ...createIdentityServices(config, storage) });
  } finally {
    await storage.close();
  }
}
