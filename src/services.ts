/**
 * The long-lived parts of one running server, built once at start-up and handed to every route
 * group. Nothing here is created per request.
 */
import type { Config } from './config/index.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import type { Authenticator } from './auth/types.js';
import type { ImageProvider } from './images/types.js';
import type { ParallelLimiter, StreamSlots } from './quota/parallel.js';
import type { QuotaServiceWithStatus } from './quota/service.js';
import type { UsageLog } from './quota/usage.js';
import type { ResumableRuns } from './core/resumable-runs.js';
import type { LmdbStorage } from './store/lmdb.js';
import type { RedisStorage } from './store/redis.js';
import type { ApiKeyStore, SessionStore, UserStore } from './store/types.js';
import type { KnowledgeBase } from './rag/knowledge-base.js';
import type { SearchProvider } from './search/types.js';
import type { ProviderRegistry } from './providers/registry.js';
import type { ReachabilityProbe } from './upstream/reachability.js';
import type { UpstreamClient } from './upstream/stream-call.js';

export interface Services {
  config: Readonly<Config>;
  logger: Logger;
  metrics: Metrics;
  /** The storage engine (LMDB, or Redis shared by many nodes): health and shutdown. */
  storage: LmdbStorage | RedisStorage;
  /** Resolves the caller of a request (API key, admin token or anonymous by address). */
  auth: Authenticator;
  /** Plans and exact quotas (reserve once per accepted request; refund on upstream failure). */
  quota: QuotaServiceWithStatus;
  /** Owner-scoped chat sessions. */
  sessions: SessionStore;
  users: UserStore;
  apiKeys: ApiKeyStore;
  /** The configured image provider (the built-in renderer when none is configured). */
  images: ImageProvider;
  /** The knowledge base: retrieval for `rag` and the `local` search provider, ingestion, listing, deletion, statistics (src/rag). */
  knowledge: KnowledgeBase;
  /** Web search for `web_search` and /api/chat/search (config.search; offline default `local`, the knowledge base). */
  search: SearchProvider;
  /** The configured models and the provider of each. */
  models: ProviderRegistry;
  /** Whether each upstream answered its last background probe (for /health). */
  reachability: ReachabilityProbe;
  /** The one client for streamed upstream calls (the chat providers), with its connection pool. */
  upstream: UpstreamClient;
  /** Requests in flight per caller (`max_parallel`, `anonymous_max_parallel`), per node. */
  parallel: ParallelLimiter;
  /** Open streams on this node (`max_streams`). */
  streams: StreamSlots;
  /** Resumable generations of this process and the stream logs of every process. */
  resumable: ResumableRuns;
  /** The usage history: one record per quota-counted request (GET /api/usage). */
  usage: UsageLog;
  /** Set when shutdown began: /health then answers 503 `draining`. */
  lifecycle: { draining: boolean };
  /** performance.now() at start, for uptime. */
  startedAt: number;
}
