/**
 * The only reader of process.env and of the config file. Everything is validated once with
 * valibot and handed out as one frozen object; a bad value stops start-up naming the key.
 */
import { readFileSync } from 'node:fs';
import * as v from 'valibot';

const ProviderName = v.picklist(['openai', 'anthropic', 'ollama', 'builtin']);
const Url = v.pipe(v.string(), v.url());
const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const NonNegativeInt = v.pipe(v.number(), v.integer(), v.minValue(0));

const PlanSchema = v.strictObject({ quota: NonNegativeInt, window_seconds: PositiveInt });

const ModelSchema = v.strictObject({
  id: v.pipe(v.string(), v.minLength(1)),
  provider: ProviderName,
  base_url: v.optional(Url),
  api_key_env: v.optional(v.string()),
  upstream_model: v.optional(v.string()),
  /** Anthropic's thinking budget (tokens) when deep thinking is on. */
  thinking_budget: v.optional(PositiveInt),
});

const SearchSchema = v.strictObject({
  provider: v.picklist(['local', 'searxng', 'brave', 'tavily']),
  base_url: v.optional(Url),
  api_key_env: v.optional(v.string()),
  timeout_ms: v.optional(PositiveInt),
});

const ImagesSchema = v.strictObject({
  provider: v.picklist(['builtin', 'openai', 'automatic1111']),
  base_url: v.optional(Url),
  api_key_env: v.optional(v.string()),
  model: v.optional(v.string()),
  timeout_ms: v.optional(PositiveInt),
});

const RagSchema = v.strictObject({
  chunk_size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(100))),
  chunk_overlap: v.optional(NonNegativeInt),
  max_document_bytes: v.optional(PositiveInt),
  min_score: v.optional(v.pipe(v.number(), v.minValue(0))),
  embeddings: v.optional(
    v.strictObject({ base_url: Url, model: v.string(), api_key_env: v.optional(v.string()) }),
  ),
});

/** The config file's shape; every key is optional. */
export const ConfigFileSchema = v.strictObject({
  auth_required: v.optional(v.boolean()),
  anonymous_plan: v.optional(v.string()),
  default_plan: v.optional(v.string()),
  plans: v.optional(v.record(v.string(), PlanSchema)),
  costs: v.optional(
    v.strictObject({ chat: v.optional(NonNegativeInt), search: v.optional(NonNegativeInt), image: v.optional(NonNegativeInt) }),
  ),
  default_model: v.optional(v.string()),
  models: v.optional(v.array(ModelSchema)),
  search: v.optional(SearchSchema),
  images: v.optional(ImagesSchema),
  rag: v.optional(RagSchema),
  session_max_turns: v.optional(PositiveInt),
  body_limit_bytes: v.optional(PositiveInt),
  max_json_depth: v.optional(PositiveInt),
  builtin_delay_ms: v.optional(NonNegativeInt),
  upstream: v.optional(
    v.strictObject({
      connect_timeout_ms: v.optional(PositiveInt),
      first_byte_timeout_ms: v.optional(PositiveInt),
      idle_timeout_ms: v.optional(PositiveInt),
      retries: v.optional(NonNegativeInt),
    }),
  ),
  shutdown_grace_ms: v.optional(PositiveInt),
  stream_stall_timeout_ms: v.optional(PositiveInt),
  trust_proxy: v.optional(v.boolean()),
});
export type ConfigFile = v.InferOutput<typeof ConfigFileSchema>;

export interface PlanConfig {
  quota: number;
  window_seconds: number;
}

/** A model as the rest of the code sees it: the upstream key already resolved. */
export interface ModelConfig {
  id: string;
  provider: 'openai' | 'anthropic' | 'ollama' | 'builtin';
  baseUrl: string | undefined;
  apiKey: string | undefined;
  upstreamModel: string;
  thinkingBudget: number;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  workers: number;
  logLevel: string;
  adminToken: string | undefined;
  authRequired: boolean;
  trustProxy: boolean;
  anonymousPlan: string;
  defaultPlan: string;
  plans: Record<string, PlanConfig>;
  costs: { chat: number; search: number; image: number };
  defaultModel: string;
  models: ModelConfig[];
  search: { provider: 'local' | 'searxng' | 'brave' | 'tavily'; baseUrl: string | undefined; apiKey: string | undefined; timeoutMs: number };
  images: { provider: 'builtin' | 'openai' | 'automatic1111'; baseUrl: string | undefined; apiKey: string | undefined; model: string | undefined; timeoutMs: number };
  rag: {
    chunkSize: number;
    chunkOverlap: number;
    maxDocumentBytes: number;
    minScore: number;
    embeddings: { baseUrl: string; model: string; apiKey: string | undefined } | undefined;
  };
  sessionMaxTurns: number;
  bodyLimitBytes: number;
  maxJsonDepth: number;
  builtinDelayMs: number;
  upstream: { connectTimeoutMs: number; firstByteTimeoutMs: number; idleTimeoutMs: number; retries: number };
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

const DEFAULT_PLANS: Record<string, PlanConfig> = {
  free: { quota: 50, window_seconds: 86_400 },
  pro: { quota: 2000, window_seconds: 86_400 },
};

function issuePath(issue: v.BaseIssue<unknown>): string {
  return (issue.path ?? []).map((item) => String(item.key)).join('.') || '(root)';
}

function readConfigFile(path: string): ConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`COLLOQUY_CONFIG: cannot read ${path} as JSON (${(error as Error).message})`);
  }
  const parsed = v.safeParse(ConfigFileSchema, raw);
  if (!parsed.success) {
    const lines = parsed.issues.map((issue) => `  ${issuePath(issue)}: ${issue.message}`);
    throw new ConfigError(`COLLOQUY_CONFIG: ${path} is invalid:\n${lines.join('\n')}`);
  }
  return parsed.output;
}

function intFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name}: expected an integer >= ${min}, got "${text}"`);
  return value;
}

function secretFrom(env: NodeJS.ProcessEnv, name: string | undefined): string | undefined {
  if (!name) return undefined;
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function envModels(env: NodeJS.ProcessEnv): ModelConfig[] {
  const models: ModelConfig[] = [];
  if (env.OPENAI_API_KEY || env.OPENAI_BASE_URL) {
    const upstreamModel = env.OPENAI_MODEL || 'gpt-4o-mini';
    models.push({
      id: upstreamModel,
      provider: 'openai',
      baseUrl: env.OPENAI_BASE_URL || 'https://api.openai.com/v1',
      apiKey: secretFrom(env, 'OPENAI_API_KEY'),
      upstreamModel,
      thinkingBudget: 0,
    });
  }
  if (env.ANTHROPIC_API_KEY) {
    const upstreamModel = env.ANTHROPIC_MODEL || 'claude-sonnet-4-5';
    models.push({
      id: upstreamModel,
      provider: 'anthropic',
      baseUrl: env.ANTHROPIC_BASE_URL || 'https://api.anthropic.com',
      apiKey: env.ANTHROPIC_API_KEY,
      upstreamModel,
      thinkingBudget: 2048,
    });
  }
  if (env.OLLAMA_HOST) {
    const upstreamModel = env.OLLAMA_MODEL || 'llama3.2';
    const host = env.OLLAMA_HOST.startsWith('http') ? env.OLLAMA_HOST : `http://${env.OLLAMA_HOST}`;
    models.push({ id: upstreamModel, provider: 'ollama', baseUrl: host, apiKey: undefined, upstreamModel, thinkingBudget: 0 });
  }
  return models;
}

const DEFAULT_BASE_URL: Record<ModelConfig['provider'], string | undefined> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  ollama: 'http://127.0.0.1:11434',
  builtin: undefined,
};

/** Reads env (and the file it names) into a frozen Config. `overrides` lets tests replace file keys. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigFile = {}): Readonly<Config> {
  const fromFile = env.COLLOQUY_CONFIG ? readConfigFile(env.COLLOQUY_CONFIG) : {};
  const checked = v.safeParse(ConfigFileSchema, { ...fromFile, ...overrides });
  if (!checked.success) {
    const lines = checked.issues.map((issue) => `  ${issuePath(issue)}: ${issue.message}`);
    throw new ConfigError(`configuration is invalid:\n${lines.join('\n')}`);
  }
  const file = checked.output;

  const plans = file.plans ?? DEFAULT_PLANS;
  const anonymousPlan = file.anonymous_plan ?? 'free';
  const defaultPlan = file.default_plan ?? 'free';
  for (const [key, plan] of [['anonymous_plan', anonymousPlan], ['default_plan', defaultPlan]] as const) {
    if (!plans[plan]) throw new ConfigError(`${key}: plan "${plan}" is not defined in plans`);
  }

  const models: ModelConfig[] = [
    { id: BUILTIN_MODEL_ID, provider: 'builtin', baseUrl: undefined, apiKey: undefined, upstreamModel: BUILTIN_MODEL_ID, thinkingBudget: 0 },
  ];
  const declared = file.models
    ? file.models.map((model) => ({
        id: model.id,
        provider: model.provider,
        baseUrl: model.base_url ?? DEFAULT_BASE_URL[model.provider],
        apiKey: secretFrom(env, model.api_key_env),
        upstreamModel: model.upstream_model ?? model.id,
        thinkingBudget: model.thinking_budget ?? 2048,
      }))
    : envModels(env);
  for (const model of declared) {
    if (models.some((known) => known.id === model.id)) throw new ConfigError(`models: duplicate model id "${model.id}"`);
    models.push(model);
  }
  const defaultModel = file.default_model ?? (declared[0]?.id ?? BUILTIN_MODEL_ID);
  if (!models.some((model) => model.id === defaultModel)) {
    throw new ConfigError(`default_model: "${defaultModel}" is not one of the configured models`);
  }

  const searchFile = file.search ?? envSearch(env);
  const imagesFile = file.images ?? { provider: 'builtin' as const };
  if (searchFile.provider !== 'local' && !searchFile.base_url && searchFile.provider === 'searxng') {
    throw new ConfigError('search.base_url: required for the searxng provider');
  }
  if (imagesFile.provider !== 'builtin' && !imagesFile.base_url && imagesFile.provider === 'automatic1111') {
    throw new ConfigError('images.base_url: required for the automatic1111 provider');
  }
  const embeddings = file.rag?.embeddings;
  const chunkSize = file.rag?.chunk_size ?? 1000;
  const chunkOverlap = file.rag?.chunk_overlap ?? 100;
  if (chunkOverlap >= chunkSize) throw new ConfigError('rag.chunk_overlap: must be smaller than rag.chunk_size');

  const config: Config = {
    host: env.HOST || '127.0.0.1',
    port: intFromEnv(env, 'PORT', 8080),
    dataDir: env.COLLOQUY_DATA_DIR || './data',
    workers: intFromEnv(env, 'WORKERS', 1, 1),
    logLevel: env.LOG_LEVEL || 'info',
    adminToken: env.COLLOQUY_ADMIN_TOKEN || undefined,
    authRequired: file.auth_required ?? env.COLLOQUY_AUTH_REQUIRED === 'true',
    trustProxy: file.trust_proxy ?? false,
    anonymousPlan,
    defaultPlan,
    plans,
    costs: { chat: file.costs?.chat ?? 1, search: file.costs?.search ?? 1, image: file.costs?.image ?? 5 },
    defaultModel,
    models,
    search: {
      provider: searchFile.provider,
      baseUrl: searchFile.base_url ?? defaultSearchUrl(searchFile.provider),
      apiKey: secretFrom(env, searchFile.api_key_env ?? defaultSearchKeyEnv(searchFile.provider)),
      timeoutMs: searchFile.timeout_ms ?? 8000,
    },
    images: {
      provider: imagesFile.provider,
      baseUrl: imagesFile.base_url ?? (imagesFile.provider === 'openai' ? 'https://api.openai.com/v1' : undefined),
      apiKey: secretFrom(env, imagesFile.api_key_env ?? (imagesFile.provider === 'openai' ? 'OPENAI_API_KEY' : undefined)),
      model: imagesFile.model,
      timeoutMs: imagesFile.timeout_ms ?? 120_000,
    },
    rag: {
      chunkSize,
      chunkOverlap,
      maxDocumentBytes: file.rag?.max_document_bytes ?? 512 * 1024,
      minScore: file.rag?.min_score ?? 0.5,
      embeddings: embeddings
        ? { baseUrl: embeddings.base_url, model: embeddings.model, apiKey: secretFrom(env, embeddings.api_key_env) }
        : undefined,
    },
    sessionMaxTurns: file.session_max_turns ?? 200,
    bodyLimitBytes: file.body_limit_bytes ?? intFromEnv(env, 'COLLOQUY_BODY_LIMIT', 1024 * 1024, 1),
    maxJsonDepth: file.max_json_depth ?? 32,
    builtinDelayMs: file.builtin_delay_ms ?? intFromEnv(env, 'COLLOQUY_BUILTIN_DELAY_MS', 0),
    upstream: {
      connectTimeoutMs: file.upstream?.connect_timeout_ms ?? 5000,
      firstByteTimeoutMs: file.upstream?.first_byte_timeout_ms ?? 60_000,
      idleTimeoutMs: file.upstream?.idle_timeout_ms ?? 30_000,
      retries: file.upstream?.retries ?? 2,
    },
    shutdownGraceMs: file.shutdown_grace_ms ?? 10_000,
    streamStallTimeoutMs: file.stream_stall_timeout_ms ?? 30_000,
    version: packageVersion(),
  };
  return deepFreeze(config);
}

function envSearch(env: NodeJS.ProcessEnv): NonNullable<ConfigFile['search']> {
  if (env.SEARXNG_URL) return { provider: 'searxng', base_url: env.SEARXNG_URL };
  if (env.TAVILY_API_KEY) return { provider: 'tavily' };
  if (env.BRAVE_API_KEY) return { provider: 'brave' };
  return { provider: 'local' };
}

function defaultSearchUrl(provider: Config['search']['provider']): string | undefined {
  if (provider === 'brave') return 'https://api.search.brave.com';
  if (provider === 'tavily') return 'https://api.tavily.com';
  return undefined;
}

function defaultSearchKeyEnv(provider: Config['search']['provider']): string | undefined {
  if (provider === 'brave') return 'BRAVE_API_KEY';
  if (provider === 'tavily') return 'TAVILY_API_KEY';
  return undefined;
}

let cachedVersion: string | undefined;
function packageVersion(): string {
  if (cachedVersion) return cachedVersion;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
    cachedVersion = pkg.version ?? '0.0.0';
  } catch {
    cachedVersion = '0.0.0';
  }
  return cachedVersion;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
