/**
 * The only reader of process.env and of the config file: the file (schema.ts, file.ts), the
 * environment (env.ts) and the defaults (defaults.ts) resolved into one frozen Config. A bad value
 * stops start-up with a ConfigError naming the key.
 */
import {
  DEFAULT_BASE_URL,
  DEFAULT_PLANS,
  NO_FALLBACKS,
  SESSION_CACHE_MB,
  defaultMaxStreams,
  defaultSearchKeyEnv,
  defaultSearchUrl,
  packageVersion,
} from './defaults.js';
import { envModels, envSearch, intFromEnv, secretFrom } from './env.js';
import { mergeConfigFile, readConfigFile } from './file.js';
import type { ConfigFile } from './schema.js';
import {
  BUILTIN_MODEL_ID,
  ConfigError,
  type Config,
  type ImagesConfig,
  type ModelConfig,
  type PlanConfig,
  type StorageConfig,
} from './types.js';

/** The plans, with the anonymous and default plans checked against them. */
function resolvePlans(file: ConfigFile): Pick<Config, 'plans' | 'anonymousPlan' | 'defaultPlan'> {
  const plans: Record<string, PlanConfig> = file.plans ?? DEFAULT_PLANS;
  const anonymousPlan = file.anonymous_plan ?? 'free';
  const defaultPlan = file.default_plan ?? 'free';
  for (const [key, plan] of [
    ['anonymous_plan', anonymousPlan],
    ['default_plan', defaultPlan],
  ] as const) {
    if (!plans[plan]) throw new ConfigError(`${key}: plan "${plan}" is not defined in plans`);
  }
  return { plans, anonymousPlan, defaultPlan };
}

/** The built-in model first, then the file's models (or those the environment registers). */
function resolveModels(file: ConfigFile, env: NodeJS.ProcessEnv): Pick<Config, 'models' | 'defaultModel'> {
  const models: ModelConfig[] = [
    {
      id: BUILTIN_MODEL_ID,
      provider: 'builtin',
      baseUrl: undefined,
      apiKey: undefined,
      upstreamModel: BUILTIN_MODEL_ID,
      thinkingBudget: 0,
      vision: false,
      ...NO_FALLBACKS,
    },
  ];
  const declared = file.models
    ? file.models.map((model) => ({
        id: model.id,
        provider: model.provider,
        baseUrl: model.base_url ?? DEFAULT_BASE_URL[model.provider],
        apiKey: secretFrom(env, model.api_key_env),
        upstreamModel: model.upstream_model ?? model.id,
        thinkingBudget: model.thinking_budget ?? 2048,
        vision: model.vision ?? false,
        fallbacks: model.fallbacks ?? [],
        cooldownAfter: model.cooldown_after ?? NO_FALLBACKS.cooldownAfter,
        cooldownSeconds: model.cooldown_s ?? NO_FALLBACKS.cooldownSeconds,
      }))
    : envModels(env);
  for (const model of declared) {
    if (models.some((known) => known.id === model.id)) throw new ConfigError(`models: duplicate model id "${model.id}"`);
    models.push(model);
  }
  for (const model of declared) {
    for (const fallback of model.fallbacks) {
      if (fallback === model.id) throw new ConfigError(`models: "${model.id}" names itself in fallbacks`);
      if (!models.some((known) => known.id === fallback)) {
        throw new ConfigError(`models: "${model.id}" falls back to "${fallback}", which is not one of the configured models`);
      }
    }
  }
  const defaultModel = file.default_model ?? declared[0]?.id ?? BUILTIN_MODEL_ID;
  if (!models.some((model) => model.id === defaultModel)) {
    throw new ConfigError(`default_model: "${defaultModel}" is not one of the configured models`);
  }
  return { models, defaultModel };
}

/** The search provider (the file's, one the environment names, or the local knowledge base). */
function resolveSearch(file: ConfigFile, env: NodeJS.ProcessEnv): Config['search'] {
  const search = file.search ?? envSearch(env);
  if (search.provider === 'searxng' && !search.base_url) throw new ConfigError('search.base_url: required for the searxng provider');
  return {
    provider: search.provider,
    baseUrl: search.base_url ?? defaultSearchUrl(search.provider),
    apiKey: secretFrom(env, search.api_key_env ?? defaultSearchKeyEnv(search.provider)),
    timeoutMs: search.timeout_ms ?? 8000,
  };
}

/** The image backend; an upstream one always has its base URL. */
function resolveImages(file: ConfigFile, env: NodeJS.ProcessEnv): ImagesConfig {
  const images = file.images ?? { provider: 'builtin' as const };
  const timeoutMs = images.timeout_ms ?? 120_000;
  switch (images.provider) {
    case 'builtin':
      return { provider: 'builtin', model: images.model, timeoutMs };
    case 'openai':
      return {
        provider: 'openai',
        baseUrl: images.base_url ?? 'https://api.openai.com/v1',
        apiKey: secretFrom(env, images.api_key_env ?? 'OPENAI_API_KEY'),
        model: images.model,
        timeoutMs,
      };
    case 'automatic1111':
      if (!images.base_url) throw new ConfigError('images.base_url: required for the automatic1111 provider');
      return {
        provider: 'automatic1111',
        baseUrl: images.base_url,
        apiKey: secretFrom(env, images.api_key_env),
        model: images.model,
        timeoutMs,
      };
  }
}

/** Chunking, scoring and the optional embeddings upstream of the knowledge base. */
function resolveRag(file: ConfigFile, env: NodeJS.ProcessEnv): Config['rag'] {
  const chunkSize = file.rag?.chunk_size ?? 1000;
  const chunkOverlap = file.rag?.chunk_overlap ?? 100;
  if (chunkOverlap >= chunkSize) throw new ConfigError('rag.chunk_overlap: must be smaller than rag.chunk_size');
  const embeddings = file.rag?.embeddings;
  return {
    chunkSize,
    chunkOverlap,
    maxDocumentBytes: file.rag?.max_document_bytes ?? 512 * 1024,
    maxFileBytes: file.rag?.max_file_bytes ?? 64 * 1024 * 1024,
    maxExtractedBytes: file.rag?.max_extracted_bytes ?? 16 * 1024 * 1024,
    maxUploadBytes: file.rag?.max_upload_bytes ?? 256 * 1024 * 1024,
    ingestThreads: file.rag?.ingest_threads,
    minScore: file.rag?.min_score ?? 0.5,
    embeddings: embeddings
      ? { baseUrl: embeddings.base_url, model: embeddings.model, apiKey: secretFrom(env, embeddings.api_key_env) }
      : undefined,
  };
}

/**
 * The storage engine: Redis when COLLOQUY_REDIS_URL or `storage.kind: "redis"` says so, else LMDB.
 * COLLOQUY_REDIS_PREFIX (like `storage.key_prefix`) keeps deployments sharing one Redis apart.
 */
function resolveStorage(file: ConfigFile, env: NodeJS.ProcessEnv): StorageConfig {
  const fromFile = file.storage?.kind === 'redis' ? file.storage : undefined;
  const url = env.COLLOQUY_REDIS_URL || fromFile?.url;
  if (!url) return { kind: 'lmdb' };
  if (!/^rediss?:\/\//.test(url)) throw new ConfigError(`COLLOQUY_REDIS_URL: expected a redis:// or rediss:// URL, got "${url}"`);
  return {
    kind: 'redis',
    url,
    keyPrefix: env.COLLOQUY_REDIS_PREFIX ?? fromFile?.key_prefix ?? 'colloquy:',
    commandTimeoutMs: fromFile?.command_timeout_ms ?? 2000,
  };
}

/** Reads env (and the file it names) into a frozen Config. `overrides` lets tests replace file keys. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigFile = {}): Readonly<Config> {
  const file = mergeConfigFile(env.COLLOQUY_CONFIG ? readConfigFile(env.COLLOQUY_CONFIG) : {}, overrides);
  const config: Config = {
    host: env.HOST || '127.0.0.1',
    port: intFromEnv(env, 'PORT', 8080),
    dataDir: env.COLLOQUY_DATA_DIR || './data',
    storage: resolveStorage(file, env),
    workers: intFromEnv(env, 'WORKERS', 1, 1),
    nodeOptions: (env.NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag.length > 0),
    logLevel: env.LOG_LEVEL || 'info',
    adminToken: env.COLLOQUY_ADMIN_TOKEN || undefined,
    authRequired: file.auth_required ?? env.COLLOQUY_AUTH_REQUIRED === 'true',
    trustProxy: file.trust_proxy ?? false,
    ...resolvePlans(file),
    costs: {
      chat: file.costs?.chat ?? 1,
      search: file.costs?.search ?? 1,
      image: file.costs?.image ?? 5,
      embeddings: file.costs?.embeddings ?? 1,
    },
    ...resolveModels(file, env),
    search: resolveSearch(file, env),
    images: resolveImages(file, env),
    rag: resolveRag(file, env),
    sessionMaxTurns: file.session_max_turns ?? 200,
    sessionCacheChars: (file.session_cache_mb ?? SESSION_CACHE_MB) * 1024 * 1024,
    bodyLimitBytes: file.body_limit_bytes ?? intFromEnv(env, 'COLLOQUY_BODY_LIMIT', 1024 * 1024, 1),
    v1BodyLimitBytes: file.v1_body_limit_bytes ?? 8 * 1024 * 1024,
    maxJsonDepth: file.max_json_depth ?? 32,
    builtinDelayMs: file.builtin_delay_ms ?? intFromEnv(env, 'COLLOQUY_BUILTIN_DELAY_MS', 0),
    upstream: {
      connectTimeoutMs: file.upstream?.connect_timeout_ms ?? 5000,
      firstByteTimeoutMs: file.upstream?.first_byte_timeout_ms ?? 60_000,
      idleTimeoutMs: file.upstream?.idle_timeout_ms ?? 30_000,
      retries: file.upstream?.retries ?? 2,
      maxFrameBytes: file.upstream_max_frame_bytes ?? 1024 * 1024,
    },
    maxAnswerBytes: file.max_answer_bytes ?? 4 * 1024 * 1024,
    defaultMaxTokens: file.default_max_tokens ?? 1024,
    usageRetentionDays: file.usage_retention_days ?? 90,
    resumable: {
      maxBytes: file.resumable?.max_bytes ?? 1024 * 1024,
      ttlSeconds: file.resumable?.ttl_s ?? 600,
      detachedTimeoutSeconds: file.resumable?.detached_timeout_s ?? 120,
    },
    corsOrigins: file.cors?.origins ?? [],
    healthProbeIntervalMs: file.health_probe_interval_ms ?? 30_000,
    anonymousMaxParallel: file.anonymous_max_parallel ?? 16,
    maxStreams: file.max_streams ?? defaultMaxStreams(),
    shutdownGraceMs: file.shutdown_grace_ms ?? 10_000,
    streamStallTimeoutMs: file.stream_stall_timeout_ms ?? 30_000,
    version: packageVersion(),
  };
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
