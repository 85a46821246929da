/** The validated configuration as the rest of the code sees it: resolved, defaulted, frozen. */

export interface PlanConfig {
  quota: number;
  window_seconds: number;
  /** Requests one caller of this plan may run at once, per node; unset: no limit. */
  max_parallel?: number | undefined;
  /** A token budget per window beside the request quota; unset: no token budget. */
  tokens?: { quota: number; window_seconds: number } | undefined;
}

/** A model as the rest of the code sees it: the upstream key already resolved. */
export interface ModelConfig {
  id: string;
  provider: 'openai' | 'anthropic' | 'ollama' | 'builtin';
  baseUrl: string | undefined;
  apiKey: string | undefined;
  upstreamModel: string;
  thinkingBudget: number;
  /** Takes image input (`vision: true` in the config file). */
  vision: boolean;
  /** Model ids tried in order when this one's upstream fails before answering. */
  fallbacks: readonly string[];
  /** Consecutive failures that put the model in a cool-down, and how long that lasts. */
  cooldownAfter: number;
  cooldownSeconds: number;
}

/** Where the service keeps its state: embedded LMDB (the default) or a shared Redis. */
export type StorageConfig =
  | { kind: 'lmdb' }
  | {
      kind: 'redis';
      url: string;
      /** Put before every key and channel (default `colloquy:`). */
      keyPrefix: string;
      /** A Redis command not answered in this time fails the request with 503 (default 2000). */
      commandTimeoutMs: number;
    };

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** `storage` in the file, or COLLOQUY_REDIS_URL (which wins over the file's url). */
  storage: StorageConfig;
  workers: number;
  /** The flags NODE_OPTIONS gives Node (and so every worker); serve leaves V8 settings given there alone. */
  nodeOptions: readonly string[];
  logLevel: string;
  adminToken: string | undefined;
  authRequired: boolean;
  /** X-Forwarded-For trust: false, true (one hop), a hop count, or the proxies' addresses/CIDRs. */
  trustProxy: boolean | number | readonly string[];
  anonymousPlan: string;
  defaultPlan: string;
  plans: Record<string, PlanConfig>;
  costs: { chat: number; search: number; image: number; embeddings: number };
  defaultModel: string;
  models: ModelConfig[];
  search: {
    provider: 'local' | 'searxng' | 'brave' | 'tavily';
    baseUrl: string | undefined;
    apiKey: string | undefined;
    timeoutMs: number;
  };
  images: ImagesConfig;
  rag: {
    chunkSize: number;
    chunkOverlap: number;
    /** Largest `text` of a JSON ingestion request (UTF-8 bytes). */
    maxDocumentBytes: number;
    /** Largest file of a multipart upload or the command line. */
    maxFileBytes: number;
    /** Largest text extracted from one document. */
    maxExtractedBytes: number;
    /** Largest multipart upload request. */
    maxUploadBytes: number;
    /** Worker threads that extract and chunk; undefined: from the core count. */
    ingestThreads: number | undefined;
    minScore: number;
    embeddings: { baseUrl: string; model: string; apiKey: string | undefined } | undefined;
  };
  sessionMaxTurns: number;
  /** Characters of decoded session turns each process keeps (LMDB engine; `session_cache_mb`). */
  sessionCacheChars: number;
  bodyLimitBytes: number;
  /** The body limit of /v1 requests. */
  v1BodyLimitBytes: number;
  maxJsonDepth: number;
  builtinDelayMs: number;
  upstream: { connectTimeoutMs: number; firstByteTimeoutMs: number; idleTimeoutMs: number; retries: number; maxFrameBytes: number };
  /** Largest answer kept and sent, in bytes; past it the reply ends with finish_reason `length`. */
  maxAnswerBytes: number;
  /** The answer tokens a token budget reserves for a request without max_tokens. */
  defaultMaxTokens: number;
  /** Days the usage history keeps each record. */
  usageRetentionDays: number;
  /** Resumable streams' log bound (bytes), retention after the end and detached run time (seconds). */
  resumable: { maxBytes: number; ttlSeconds: number; detachedTimeoutSeconds: number };
  /** Origins whose browser pages may call the API (CORS); empty: none. */
  corsOrigins: readonly string[];
  /** How often each upstream's reachability is probed in the background for /health. */
  healthProbeIntervalMs: number;
  /** Requests one anonymous client address may run at once, per node. */
  anonymousMaxParallel: number;
  /** Open streams this node serves at most; beyond it new streams get 503 overloaded. */
  maxStreams: number;
  shutdownGraceMs: number;
  /** A streamed response whose client has not drained for this long is closed (and its upstream cancelled). */
  streamStallTimeoutMs: number;
  version: string;
}

/** Raised when the environment or the config file is invalid; the message names the bad key. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const BUILTIN_MODEL_ID = 'builtin-extractive';

/** The image backend: the upstream ones always have their base URL (the loader refuses them without one). */
export type ImagesConfig =
  | { provider: 'builtin'; model: string | undefined; timeoutMs: number }
  | { provider: 'openai' | 'automatic1111'; baseUrl: string; apiKey: string | undefined; model: string | undefined; timeoutMs: number };
