/**
 * The long-lived parts of one running server, built once at start-up and handed to every route
 * group. Nothing here is created per request.
 */
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import type { LmdbStorage } from './store/lmdb.js';

export interface Services {
  config: Readonly<Config>;
  logger: Logger;
  metrics: Metrics;
  storage: LmdbStorage;
  /** performance.now() at start, for uptime. */
  startedAt: number;
}
