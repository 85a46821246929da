/** The config file's shape, as valibot schemas: every key optional, unknown keys refused. */
import { isIP } from 'node:net';
import * as v from 'valibot';

/** An IP address, or an address with a prefix length (`10.0.0.0/8`, `fd00::/8`). */
function isAddressOrCidr(value: string): boolean {
  const [address = '', prefix, extra] = value.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

const ProviderName = v.picklist(['openai', 'anthropic', 'ollama', 'builtin']);
const Url = v.pipe(v.string(), v.url());
const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const NonNegativeInt = v.pipe(v.number(), v.integer(), v.minValue(0));

const PlanSchema = v.strictObject({
  quota: NonNegativeInt,
  window_seconds: PositiveInt,
  max_parallel: v.optional(PositiveInt),
  /** A token budget beside the request quota: prompt and answer tokens per window. */
  tokens: v.optional(v.strictObject({ quota: NonNegativeInt, window_seconds: PositiveInt })),
});

const ModelSchema = v.strictObject({
  id: v.pipe(v.string(), v.minLength(1)),
  provider: ProviderName,
  base_url: v.optional(Url),
  api_key_env: v.optional(v.string()),
  upstream_model: v.optional(v.string()),
  /** Anthropic's thinking budget (tokens) when deep thinking is on. */
  thinking_budget: v.optional(PositiveInt),
  /** The model takes image input (`image_url` parts on /v1); without it such parts are refused. */
  vision: v.optional(v.boolean()),
  /** Models tried in order when this one's upstream fails before any part of the answer came. */
  fallbacks: v.optional(v.array(v.pipe(v.string(), v.minLength(1)))),
  /** Consecutive upstream failures after which this model is skipped for `cooldown_s`. */
  cooldown_after: v.optional(PositiveInt),
  cooldown_s: v.optional(PositiveInt),
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
  max_file_bytes: v.optional(PositiveInt),
  max_extracted_bytes: v.optional(PositiveInt),
  max_upload_bytes: v.optional(PositiveInt),
  ingest_threads: v.optional(NonNegativeInt),
  min_score: v.optional(v.pipe(v.number(), v.minValue(0))),
  embeddings: v.optional(v.strictObject({ base_url: Url, model: v.string(), api_key_env: v.optional(v.string()) })),
});

/** The config file's shape; every key is optional. */
const StorageSchema = v.variant('kind', [
  v.strictObject({ kind: v.literal('lmdb') }),
  v.strictObject({
    kind: v.literal('redis'),
    url: v.pipe(v.string(), v.regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')),
    key_prefix: v.optional(v.pipe(v.string(), v.maxLength(64))),
    command_timeout_ms: v.optional(PositiveInt),
  }),
]);

export const ConfigFileSchema = v.strictObject({
  storage: v.optional(StorageSchema),
  auth_required: v.optional(v.boolean()),
  anonymous_plan: v.optional(v.string()),
  default_plan: v.optional(v.string()),
  plans: v.optional(v.record(v.string(), PlanSchema)),
  costs: v.optional(
    v.strictObject({
      chat: v.optional(NonNegativeInt),
      search: v.optional(NonNegativeInt),
      image: v.optional(NonNegativeInt),
      embeddings: v.optional(NonNegativeInt),
    }),
  ),
  default_model: v.optional(v.string()),
  models: v.optional(v.array(ModelSchema)),
  search: v.optional(SearchSchema),
  images: v.optional(ImagesSchema),
  rag: v.optional(RagSchema),
  session_max_turns: v.optional(PositiveInt),
  /** Decoded session turns kept in memory per process (LMDB engine), in MiB of text: 0 keeps none. */
  session_cache_mb: v.optional(NonNegativeInt),
  body_limit_bytes: v.optional(PositiveInt),
  /** The body limit of /v1 requests (whole agent conversations, image parts): default 8 MiB. */
  v1_body_limit_bytes: v.optional(PositiveInt),
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
  upstream_max_frame_bytes: v.optional(PositiveInt),
  max_answer_bytes: v.optional(PositiveInt),
  /** The answer tokens a token budget reserves for a request that sets no max_tokens. */
  default_max_tokens: v.optional(PositiveInt),
  /** How long the usage history (GET /api/usage) keeps each record. */
  usage_retention_days: v.optional(PositiveInt),
  /** Resumable streams: each log's byte bound, how long it is kept after the end, how long a generation runs without a client. */
  resumable: v.optional(
    v.strictObject({ max_bytes: v.optional(PositiveInt), ttl_s: v.optional(PositiveInt), detached_timeout_s: v.optional(PositiveInt) }),
  ),
  health_probe_interval_ms: v.optional(PositiveInt),
  /** Origins (`https://app.example`) whose pages may call /api/* and /v1/* from a browser. */
  cors: v.optional(
    v.strictObject({
      origins: v.array(v.pipe(v.string(), v.regex(/^https?:\/\/[^/\s]+$/, 'must be an origin such as "https://app.example"'))),
    }),
  ),
  anonymous_max_parallel: v.optional(PositiveInt),
  max_streams: v.optional(PositiveInt),
  shutdown_grace_ms: v.optional(PositiveInt),
  stream_stall_timeout_ms: v.optional(PositiveInt),
  /** `true` = one proxy hop, a number = that many hops, or the proxies' addresses/CIDRs. */
  trust_proxy: v.optional(
    v.union(
      [
        v.boolean(),
        v.pipe(v.number(), v.integer(), v.minValue(0, 'must be at least 0'), v.maxValue(16, 'must be at most 16')),
        v.array(v.pipe(v.string(), v.check(isAddressOrCidr, 'must be an IP address or CIDR such as "10.0.0.0/8"'))),
      ],
      'must be true/false, a number of proxy hops, or a list of proxy addresses or CIDRs',
    ),
  ),
});
export type ConfigFile = v.InferOutput<typeof ConfigFileSchema>;
