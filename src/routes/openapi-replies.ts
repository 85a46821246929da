/**
 * The shapes of our replies and stream events, as valibot schemas, for the OpenAPI document: the
 * same converter that turns the request schemas into JSON Schema turns these, and a test checks
 * every documented example's real reply against them, so the description cannot drift.
 */
import * as v from 'valibot';
import { ERROR_CATALOGUE } from '../errors.js';

const Str = v.string();
const Int = v.pipe(v.number(), v.integer());
const Timestamp = v.pipe(v.string(), v.isoTimestamp());
const Nullable = <T extends v.GenericSchema>(schema: T) => v.nullable(schema);

const CODES = Object.keys(ERROR_CATALOGUE) as Array<keyof typeof ERROR_CATALOGUE>;

/** Every error body of /api, /health and /metrics. */
export const ErrorReply = v.object({
  error: v.object({
    code: v.picklist(CODES),
    message: Str,
    details: v.optional(v.array(v.object({ path: Str, message: Str }))),
  }),
});

/** Every error body under /v1 (OpenAI's shape, our code in `code`). */
export const OpenAiErrorReply = v.object({
  error: v.object({
    message: Str,
    type: Str,
    param: Nullable(Str),
    code: v.picklist(CODES),
    details: v.optional(v.array(v.object({ path: Str, message: Str }))),
  }),
});

const QuotaFields = { plan: Str, remaining: Int, remaining_tokens: v.optional(Int), reset: Timestamp };
const Usage = v.object({ input_tokens: Int, output_tokens: Int });
const FinishReason = v.picklist(['stop', 'length', 'error', 'tool_calls', 'cancelled']);
const Source = v.object({
  index: Int,
  kind: v.picklist(['document', 'web']),
  title: Str,
  url: v.optional(Str),
  page: v.optional(Int),
  snippet: Str,
});
const SearchSummary = v.object({ provider: Str, query: Str, result_count: Int });
const Attempts = v.array(v.object({ model: Str, error_code: Str }));

const chatResultFields = {
  response: Str,
  model: Str,
  ...QuotaFields,
  timestamp: Timestamp,
  session_id: v.optional(Str),
  finish_reason: FinishReason,
  usage: Usage,
  thinking: v.optional(Str),
  sources: v.optional(v.array(Source)),
  search: v.optional(SearchSummary),
  attempts: v.optional(Attempts),
};

/** POST /api/chat/ and /api/chat/search (JSON). */
export const ChatReply = v.object(chatResultFields);

/** The SSE events of /api/chat/stream (and /api/chat/search with Accept: text/event-stream), by event name. */
export const ChatSseEvents = {
  start: v.object({ stream_id: v.optional(Str), model: Str, session_id: v.optional(Str), ...QuotaFields }),
  sources: v.object({ sources: v.array(Source), search: v.optional(SearchSummary) }),
  thinking: v.object({ text: Str }),
  delta: v.object({ text: Str }),
  done: v.object({
    finish_reason: FinishReason,
    usage: Usage,
    timestamp: Timestamp,
    model: Str,
    attempts: v.optional(Attempts),
    remaining_tokens: v.optional(Int),
  }),
  error: v.object({ error: v.object({ code: v.picklist(CODES), message: Str }) }),
};

const Stage = v.picklist(['accepted', 'history', 'retrieval', 'search', 'thinking', 'generating', 'saving']);

/** The NDJSON lines of /api/chat/progress, by `type`. */
const Seq = { seq: v.optional(Int) };
export const ChatNdjsonLines = {
  progress: v.object({
    type: v.literal('progress'),
    stage: Stage,
    message: Str,
    elapsed_ms: Int,
    output_tokens: v.optional(Int),
    stream_id: v.optional(Str),
    ...Seq,
  }),
  sources: v.object({ type: v.literal('sources'), sources: v.array(Source), ...Seq }),
  result: v.object({ type: v.literal('result'), ...chatResultFields, ...Seq }),
  error: v.object({ type: v.literal('error'), error: v.object({ code: v.picklist(CODES), message: Str }), ...Seq }),
};

/** POST /api/chat/stream/{stream_id}/cancel. */
export const CancelReply = v.object({ stream_id: Str, cancelled: v.boolean() });

const Image = v.object({ mime_type: Str, width: Int, height: Int, b64_json: Str, revised_prompt: v.optional(Str) });
const imageResultFields = { images: v.array(Image), model: Str, note: v.optional(Str), ...QuotaFields, timestamp: Timestamp };

/** POST /api/chat/image (JSON). */
export const ImageReply = v.object(imageResultFields);

/** The NDJSON lines of POST /api/chat/image with Accept: application/x-ndjson, by `type`. */
export const ImageNdjsonLines = {
  progress: v.object({ type: v.literal('progress'), stage: Str, message: Str, elapsed_ms: Int, progress: v.optional(v.number()) }),
  result: v.object({ type: v.literal('result'), ...imageResultFields }),
  error: v.object({ type: v.literal('error'), error: v.object({ code: v.picklist(CODES), message: Str }) }),
};

/** GET /health. */
export const HealthReply = v.object({
  status: v.picklist(['ok', 'degraded', 'unavailable', 'draining']),
  version: Str,
  uptime_s: Int,
  checks: v.object({
    storage: v.object({ ok: v.boolean(), engine: Str, latency_ms: v.number(), detail: v.optional(Str) }),
    providers: v.record(Str, v.object({ provider: Str, status: Str, reason: v.optional(Str) })),
  }),
});

/** GET /api/models. */
export const ModelsReply = v.object({
  default_model: Str,
  models: v.array(v.object({ id: Str, provider: Str, upstream_model: Str, default: v.boolean() })),
});

const User = v.object({ user_id: Str, plan: Str, created: Timestamp });
/** A user of the admin API. */
export const UserReply = User;
/** GET /api/admin/users. */
export const UsersReply = v.object({ users: v.array(User), next_after: v.optional(Str) });
/** GET /api/admin/plans. */
export const PlansReply = v.object({
  default_plan: Str,
  anonymous_plan: Str,
  plans: v.array(v.object({ name: Str, quota: Int, window_seconds: Int, max_parallel: v.optional(Int) })),
});

const KeyFields = {
  key_id: Str,
  prefix: Str,
  name: Nullable(Str),
  created: Timestamp,
  last_used: Nullable(Timestamp),
  revoked: v.boolean(),
  revoked_at: Nullable(Timestamp),
};
/** A key as listed (never its secret). */
const Key = v.object(KeyFields);
/** POST /api/keys: the key's secret is shown only here. */
export const CreatedKeyReply = v.object({ ...KeyFields, key: Str });
/** POST /api/admin/users/{user_id}/keys. */
export const AdminCreatedKeyReply = v.object({ user_id: Str, ...KeyFields, key: Str });
/** GET /api/keys. */
export const KeysReply = v.object({ keys: v.array(Key) });
/** GET /api/admin/users/{user_id}/keys. */
export const AdminKeysReply = v.object({ user_id: Str, keys: v.array(Key) });
/** DELETE /api/keys/{key_id}. */
export const RevokedKeyReply = v.object({ key_id: Str, revoked: v.literal(true) });
/** DELETE /api/admin/users/{user_id}/keys/{key_id}. */
export const AdminRevokedKeyReply = v.object({ user_id: Str, key_id: Str, revoked: v.literal(true) });

/** GET /api/chat/quota/{user_id}. */
export const QuotaReply = v.object({
  user_id: Str,
  plan: Str,
  limit: Int,
  used: Int,
  remaining: Int,
  reset: Timestamp,
  window_seconds: Int,
  tokens: v.optional(v.object({ limit: Int, used: Int, remaining: Int, reset: Timestamp, window_seconds: Int })),
});

const SessionMessage = v.object({
  role: v.picklist(['user', 'assistant', 'tool']),
  content: Str,
  timestamp: Timestamp,
  incomplete: v.optional(v.boolean()),
  tool_calls: v.optional(v.array(v.object({ id: Str, type: v.literal('function'), function: v.object({ name: Str, arguments: Str }) }))),
  tool_call_id: v.optional(Str),
});
const UsageTotals = { requests: Int, input_tokens: Int, output_tokens: Int, errors: Int };
/** GET /api/usage. */
export const UsageReply = v.object({
  user_id: Nullable(Str),
  from: Timestamp,
  to: Timestamp,
  group_by: v.picklist(['day', 'model', 'key']),
  total: v.object(UsageTotals),
  groups: v.array(v.object({ key: Str, ...UsageTotals })),
  truncated: v.optional(v.literal(true)),
});

/** GET /api/chat/session/{id}. */
export const SessionReply = v.object({
  session_id: Str,
  created: Timestamp,
  updated: Timestamp,
  message_count: Int,
  messages: v.array(SessionMessage),
});
/** GET /api/chat/sessions. */
export const SessionsReply = v.object({
  sessions: v.array(v.object({ session_id: Str, message_count: Int, created: Timestamp, updated: Timestamp })),
});
/** DELETE /api/chat/session/{id}. */
export const DeletedSessionReply = v.object({ session_id: Str, deleted: v.literal(true) });

const Collection = v.object({ name: Str, documents: Int, chunks: Int });
const Document = v.object({
  document_id: Str,
  title: Str,
  collection: Str,
  chunks: Int,
  chars: Int,
  format: v.picklist(['text', 'markdown', 'html', 'pdf', 'docx']),
  pages: v.optional(Int),
  indexed_at: Timestamp,
  url: v.optional(Str),
});
/** POST /api/rag/documents with JSON. */
export const IngestedReply = v.object({ document_id: Str, chunks: Int, collection: Str, title: Str, replaced: v.boolean() });
const UploadedFile = v.object({
  status: v.literal('done'),
  file: Str,
  document_id: Str,
  chunks: Int,
  collection: Str,
  title: Str,
  replaced: v.boolean(),
});
/** POST /api/rag/documents with files (201: every file went in). */
const UploadedReply = v.object({ documents: v.array(UploadedFile) });
/** POST /api/rag/documents: one document as JSON, or files. */
export const IngestReply = v.union([IngestedReply, UploadedReply]);
const IngestError = v.object({ code: v.picklist(CODES), message: Str });
/** The NDJSON lines of POST /api/rag/documents with Accept: application/x-ndjson, by `type`. */
export const IngestNdjsonLines = {
  progress: v.object({
    type: v.literal('progress'),
    index: Int,
    file: Str,
    stage: v.picklist(['extracting', 'chunking', 'indexing', 'done', 'error']),
    document_id: v.optional(Str),
    chunks: v.optional(Int),
    collection: v.optional(Str),
    title: v.optional(Str),
    replaced: v.optional(v.boolean()),
    error: v.optional(IngestError),
  }),
  summary: v.object({ type: v.literal('summary'), status: Int, indexed: Int, failed: Int, chunks: Int }),
  error: v.object({ type: v.literal('error'), error: IngestError }),
};
/** GET /api/rag/documents. */
export const DocumentsReply = v.object({ documents: v.array(Document), collections: v.array(Collection), next_after: v.optional(Str) });
/** GET /api/rag/documents/{document_id}. */
export const DocumentReply = Document;
/** DELETE /api/rag/documents/{document_id}. */
export const DeletedDocumentReply = v.object({ document_id: Str, deleted: v.literal(true) });
/** DELETE /api/rag/documents?collection=…. */
export const DeletedCollectionReply = v.object({ collection: Str, deleted_documents: Int });
/** GET /api/rag/collections. */
export const CollectionsReply = v.object({ collections: v.array(Collection) });
/** GET /api/chat/rag/stats. */
export const RagStatsReply = v.object({
  documents: Int,
  chunks: Int,
  collections: Int,
  index_bytes: Int,
  queries: Int,
  hit_rate: v.number(),
  avg_retrieval_ms: v.number(),
  last_indexed: Nullable(Timestamp),
  retriever: v.object({ kind: Str }),
});

const OpenAiUsage = v.object({ prompt_tokens: Int, completion_tokens: Int, total_tokens: Int });
const OpenAiToolCall = v.object({ id: Str, type: v.literal('function'), function: v.object({ name: Str, arguments: Str }) });
const OpenAiFinish = v.picklist(['stop', 'length', 'tool_calls', 'content_filter']);
const Extension = {
  quota: v.optional(v.object(QuotaFields)),
  sources: v.optional(v.array(Source)),
  session_id: v.optional(Str),
  attempts: v.optional(Attempts),
};

/** POST /v1/chat/completions (JSON). */
export const CompletionReply = v.object({
  id: Str,
  object: v.literal('chat.completion'),
  created: Int,
  model: Str,
  choices: v.array(
    v.object({
      index: Int,
      message: v.object({
        role: v.literal('assistant'),
        content: Nullable(Str),
        refusal: Nullable(Str),
        tool_calls: v.optional(v.array(OpenAiToolCall)),
        reasoning_content: v.optional(Str),
      }),
      finish_reason: OpenAiFinish,
      logprobs: v.null(),
    }),
  ),
  usage: OpenAiUsage,
  ...Extension,
});

/** The `data:` events of a /v1 stream: a chunk, or an error (then the stream ends). */
export const CompletionSseEvents = {
  chunk: v.object({
    id: Str,
    object: v.literal('chat.completion.chunk'),
    created: Int,
    model: Str,
    choices: v.array(
      v.object({
        index: Int,
        delta: v.object({
          role: v.optional(v.literal('assistant')),
          content: v.optional(Str),
          reasoning_content: v.optional(Str),
          tool_calls: v.optional(
            v.array(
              v.object({
                index: Int,
                id: v.optional(Str),
                type: v.optional(v.literal('function')),
                function: v.object({ name: v.optional(Str), arguments: Str }),
              }),
            ),
          ),
        }),
        finish_reason: Nullable(OpenAiFinish),
        logprobs: v.null(),
      }),
    ),
    usage: v.optional(OpenAiUsage),
    ...Extension,
  }),
  error: OpenAiErrorReply,
};

const ModelEntry = v.object({ id: Str, object: v.literal('model'), created: Int, owned_by: Str });
/** GET /v1/models. */
export const OpenAiModelsReply = v.object({ object: v.literal('list'), data: v.array(ModelEntry) });
/** GET /v1/models/{id}. */
export const OpenAiModelReply = ModelEntry;
/** POST /v1/embeddings. */
export const EmbeddingsReply = v.object({
  object: v.literal('list'),
  data: v.array(v.object({ object: v.literal('embedding'), index: Int, embedding: v.union([v.array(v.number()), Str]) })),
  model: Str,
  usage: v.object({ prompt_tokens: Int, total_tokens: Int }),
});

/** GET /openapi.json: an OpenAPI 3.1 document. */
export const OpenApiReply = v.object({
  openapi: v.literal('3.1.0'),
  info: v.object({ title: Str, version: Str }),
  paths: v.record(Str, v.record(Str, v.object({ summary: Str, responses: v.record(Str, v.unknown()) }))),
});
