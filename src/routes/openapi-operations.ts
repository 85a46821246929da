/**
 * What the OpenAPI document says about each operation of the router: summary, access, the valibot
 * schema its body is validated with, its replies (JSON, SSE events, NDJSON lines) and runnable
 * examples, keyed `METHOD path` in the order the examples run. openapi.ts turns this into the
 * document and refuses to start when it and the router disagree.
 */
import type * as v from 'valibot';
import { ChatRequestSchema, SearchChatRequestSchema } from '../core/chat-request.js';
import { ImageBodySchema } from '../images/request.js';
import { adminBodySchemas } from './admin.js';
import { CreateKeyBody } from './keys.js';
import * as replies from './openapi-replies.js';
import { IngestBody } from './rag-upload.js';
import { EmbeddingsSchema } from './v1.js';
import { CompletionRequestSchema } from './v1-request.js';

export type Schema = v.GenericSchema;
export type Json = Record<string, unknown>;

/** Who may call an operation. */
type Access = 'open' | 'caller' | 'admin';

/** One way a reply can come: JSON, an SSE stream of named events, NDJSON lines by `type`, or text. */
export type Reply =
  | { kind: 'json'; schema: Schema }
  | { kind: 'sse'; events: Record<string, Schema>; named: boolean }
  | { kind: 'ndjson'; lines: Record<string, Schema> }
  | { kind: 'text'; contentType: string };

/** A request the test sends as documented (body, Accept header, query). */
export interface Example {
  name: string;
  body?: unknown;
  accept?: string;
  query?: Record<string, string>;
}

/** What the document says about one operation. */
export interface Operation {
  summary: string;
  description?: string;
  tag: string;
  access: Access;
  body?: Schema;
  /** A multipart/form-data request the route also takes (file uploads), as JSON Schema. */
  upload?: Json;
  /** Path parameters' example values (they name things earlier examples created). */
  params?: Record<string, string>;
  query?: Array<{ name: string; description: string; schema: Json }>;
  status: number;
  replies: Reply[];
  /** Counted against the caller's quota: RateLimit headers on the reply. */
  quota?: boolean;
  examples: Example[];
}

const ADMIN_NOTE = 'Needs the admin token (COLLOQUY_ADMIN_TOKEN) as the bearer.';
const PAGE_QUERY = [
  { name: 'limit', description: 'Items per page (1-1000, default 100).', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
  { name: 'after', description: 'The `next_after` of the previous page.', schema: { type: 'string' } },
];

const json = (schema: Schema): Reply => ({ kind: 'json', schema });

/** Every operation of the service, keyed `METHOD path` with the router's path templates, in the order the examples run. */
export function operations(planNames: string[]): Record<string, Operation> {
  const admin = adminBodySchemas(planNames);
  const chatExample = { message: 'At what temperature is green tea brewed?', rag: true, session_id: 'docs-example' };
  const completion = {
    model: 'builtin-extractive',
    messages: [{ role: 'user', content: 'At what temperature is green tea brewed?' }],
    rag: true,
  };
  return {
    'GET /health': {
      summary: 'Health of the node: storage and each upstream',
      description:
        '200 when serving (`ok`, or `degraded` when an upstream is unreachable), 503 when `unavailable` or `draining`. Never quota-counted.',
      tag: 'Operations',
      access: 'open',
      status: 200,
      replies: [json(replies.HealthReply)],
      examples: [{ name: 'health' }],
    },
    'GET /openapi.json': {
      summary: 'This document (OpenAPI 3.1)',
      description: 'Rendered as a reference page at GET /docs.',
      tag: 'Operations',
      access: 'open',
      status: 200,
      replies: [json(replies.OpenApiReply)],
      examples: [{ name: 'document' }],
    },
    'GET /metrics': {
      summary: 'Prometheus metrics',
      tag: 'Operations',
      access: 'open',
      status: 200,
      replies: [{ kind: 'text', contentType: 'text/plain; version=0.0.4; charset=utf-8' }],
      examples: [{ name: 'scrape' }],
    },
    'POST /api/admin/users': {
      summary: 'Create a user',
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      body: admin.CreateUserBody,
      status: 201,
      replies: [json(replies.UserReply)],
      examples: [{ name: 'create', body: { user_id: 'bob', plan: planNames[0] } }],
    },
    'GET /api/admin/users': {
      summary: 'List users',
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      query: PAGE_QUERY,
      status: 200,
      replies: [json(replies.UsersReply)],
      examples: [{ name: 'list', query: { limit: '10' } }],
    },
    'GET /api/admin/plans': {
      summary: 'The configured plans',
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      status: 200,
      replies: [json(replies.PlansReply)],
      examples: [{ name: 'plans' }],
    },
    'GET /api/admin/users/:user_id': {
      summary: 'Read a user',
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      params: { user_id: 'bob' },
      status: 200,
      replies: [json(replies.UserReply)],
      examples: [{ name: 'read' }],
    },
    'PATCH /api/admin/users/:user_id': {
      summary: "Change a user's plan",
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      params: { user_id: 'bob' },
      body: admin.PatchUserBody,
      status: 200,
      replies: [json(replies.UserReply)],
      examples: [{ name: 'change plan', body: { plan: planNames.at(-1) } }],
    },
    'POST /api/admin/users/:user_id/keys': {
      summary: 'Create an API key for a user (the secret is shown only here)',
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      params: { user_id: 'bob' },
      body: admin.CreateKeyBody,
      status: 201,
      replies: [json(replies.AdminCreatedKeyReply)],
      examples: [{ name: 'create key', body: { name: 'laptop' } }],
    },
    'GET /api/admin/users/:user_id/keys': {
      summary: "List a user's keys",
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      params: { user_id: 'bob' },
      status: 200,
      replies: [json(replies.AdminKeysReply)],
      examples: [{ name: 'list keys' }],
    },
    'DELETE /api/admin/users/:user_id/keys/:key_id': {
      summary: "Revoke a user's key",
      description: ADMIN_NOTE,
      tag: 'Admin',
      access: 'admin',
      params: { user_id: 'bob', key_id: '0123456789abcdef' },
      status: 200,
      replies: [json(replies.AdminRevokedKeyReply)],
      examples: [{ name: 'revoke' }],
    },
    'POST /api/keys': {
      summary: 'Create another key for the calling user (the secret is shown only here)',
      tag: 'Keys',
      access: 'caller',
      body: CreateKeyBody,
      status: 201,
      replies: [json(replies.CreatedKeyReply)],
      examples: [{ name: 'create', body: { name: 'ci' } }],
    },
    'GET /api/keys': {
      summary: "The calling user's keys (never a secret)",
      tag: 'Keys',
      access: 'caller',
      status: 200,
      replies: [json(replies.KeysReply)],
      examples: [{ name: 'list' }],
    },
    'DELETE /api/keys/:key_id': {
      summary: 'Revoke one of your keys (it answers 401 from then on)',
      tag: 'Keys',
      access: 'caller',
      params: { key_id: '0123456789abcdef' },
      status: 200,
      replies: [json(replies.RevokedKeyReply)],
      examples: [{ name: 'revoke' }],
    },
    'POST /api/rag/documents': {
      summary: 'Add documents to the knowledge base: one as JSON, or files (.txt .md .html .pdf .docx) as multipart/form-data',
      description: `${ADMIN_NOTE} JSON: the same url (else title) replaces. Files: each stands alone; 201 when all went in, else 422 unprocessable_document listing every file's outcome (the others stay in). With Accept: application/x-ndjson, one line per stage of every document, then a summary.`,
      tag: 'Knowledge base',
      access: 'admin',
      body: IngestBody,
      upload: {
        type: 'object',
        properties: {
          collection: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
          file: {
            type: 'array',
            items: { type: 'string', contentMediaType: 'application/octet-stream' },
            description: 'One or many files (at most 1000), under any field name; file names are read as UTF-8.',
          },
        },
      },
      status: 201,
      replies: [json(replies.IngestReply), { kind: 'ndjson', lines: replies.IngestNdjsonLines }],
      examples: [
        {
          name: 'tea',
          body: { title: 'Tea guide', text: 'Green tea is brewed at 80 degrees for two minutes.', collection: 'examples' },
        },
        {
          name: 'coffee',
          body: {
            title: 'Coffee guide',
            text: 'Espresso is brewed at 93 degrees.',
            url: 'https://example.com/coffee',
            collection: 'examples',
          },
        },
      ],
    },
    'GET /api/rag/documents': {
      summary: 'List documents',
      description: ADMIN_NOTE,
      tag: 'Knowledge base',
      access: 'admin',
      query: [...PAGE_QUERY, { name: 'collection', description: 'Only this collection.', schema: { type: 'string' } }],
      status: 200,
      replies: [json(replies.DocumentsReply)],
      examples: [{ name: 'list', query: { collection: 'examples' } }],
    },
    'GET /api/rag/documents/:document_id': {
      summary: 'Read a document',
      description: ADMIN_NOTE,
      tag: 'Knowledge base',
      access: 'admin',
      params: { document_id: 'doc_0123456789abcdef01234567' },
      status: 200,
      replies: [json(replies.DocumentReply)],
      examples: [{ name: 'read' }],
    },
    'GET /api/rag/collections': {
      summary: 'Collections with their document and chunk counts',
      tag: 'Knowledge base',
      access: 'caller',
      status: 200,
      replies: [json(replies.CollectionsReply)],
      examples: [{ name: 'collections' }],
    },
    'GET /api/chat/rag/stats': {
      summary: 'Knowledge-base statistics',
      tag: 'Knowledge base',
      access: 'caller',
      status: 200,
      replies: [json(replies.RagStatsReply)],
      examples: [{ name: 'stats' }],
    },
    'POST /api/chat': {
      summary: 'Chat: one JSON reply',
      tag: 'Chat',
      access: 'caller',
      body: ChatRequestSchema,
      status: 200,
      quota: true,
      replies: [json(replies.ChatReply)],
      examples: [{ name: 'from the knowledge base, in a session', body: chatExample }],
    },
    'POST /api/chat/stream': {
      summary: 'Chat as Server-Sent Events',
      tag: 'Chat',
      access: 'caller',
      body: ChatRequestSchema,
      status: 200,
      quota: true,
      replies: [{ kind: 'sse', events: replies.ChatSseEvents, named: true }],
      examples: [{ name: 'streamed', body: { message: 'At what temperature is green tea brewed?', rag: true, deep_thinking: true } }],
    },
    'POST /api/chat/progress': {
      summary: 'Chat as NDJSON progress lines, then the result',
      tag: 'Chat',
      access: 'caller',
      body: ChatRequestSchema,
      status: 200,
      quota: true,
      replies: [{ kind: 'ndjson', lines: replies.ChatNdjsonLines }],
      examples: [
        { name: 'progress', body: { message: 'At what temperature is green tea brewed?', rag: true } },
        { name: 'resumable progress', body: { message: 'At what temperature is green tea brewed?', rag: true, resumable: true } },
      ],
    },
    'POST /api/chat/search': {
      summary: 'Answer from a web search, with numbered citations (SSE with Accept: text/event-stream)',
      tag: 'Chat',
      access: 'caller',
      body: SearchChatRequestSchema,
      status: 200,
      quota: true,
      replies: [json(replies.ChatReply), { kind: 'sse', events: replies.ChatSseEvents, named: true }],
      examples: [
        { name: 'search', body: { message: 'green tea temperature', max_results: 3 } },
        { name: 'search, streamed', body: { message: 'green tea temperature' }, accept: 'text/event-stream' },
      ],
    },
    'GET /api/chat/stream/:stream_id': {
      summary: 'Resume a resumable stream (SSE): the events after Last-Event-ID (or ?after=), then live until done',
      description: 'Unknown, someone else’s and expired streams answer 204 (stop reconnecting).',
      tag: 'Chat',
      access: 'caller',
      params: { stream_id: 'st_000000000000000000000000' },
      query: [
        {
          name: 'after',
          description: 'The sequence number to resume after (Last-Event-ID wins).',
          schema: { type: 'integer', minimum: 0 },
        },
      ],
      status: 200,
      replies: [{ kind: 'sse', events: replies.ChatSseEvents, named: true }],
      examples: [{ name: 'resume from the start' }],
    },
    'GET /api/chat/progress/:stream_id': {
      summary: 'Resume a resumable stream as NDJSON lines (each with its seq)',
      tag: 'Chat',
      access: 'caller',
      params: { stream_id: 'st_000000000000000000000000' },
      query: [{ name: 'after', description: 'The sequence number to resume after.', schema: { type: 'integer', minimum: 0 } }],
      status: 200,
      replies: [{ kind: 'ndjson', lines: replies.ChatNdjsonLines }],
      examples: [{ name: 'resume after the first line', query: { after: '1' } }],
    },
    'POST /api/chat/stream/:stream_id/cancel': {
      summary: 'Stop a resumable generation on purpose (followers get done, finish_reason "cancelled")',
      tag: 'Chat',
      access: 'caller',
      params: { stream_id: 'st_000000000000000000000000' },
      status: 200,
      replies: [json(replies.CancelReply)],
      examples: [{ name: 'cancel' }],
    },
    'POST /api/chat/image': {
      summary: 'Generate images (NDJSON progress with Accept: application/x-ndjson)',
      tag: 'Images',
      access: 'caller',
      body: ImageBodySchema,
      status: 200,
      quota: true,
      replies: [json(replies.ImageReply), { kind: 'ndjson', lines: replies.ImageNdjsonLines }],
      examples: [
        { name: 'image', body: { prompt: 'a lighthouse at dusk', size: '256x256' } },
        { name: 'image with progress', body: { prompt: 'a lighthouse at dusk', size: '256x256' }, accept: 'application/x-ndjson' },
      ],
    },
    'GET /api/models': {
      summary: 'The configured models',
      tag: 'Chat',
      access: 'caller',
      status: 200,
      replies: [json(replies.ModelsReply)],
      examples: [{ name: 'models' }],
    },
    'GET /api/chat/session/:id': {
      summary: 'Read one of your sessions',
      tag: 'Sessions',
      access: 'caller',
      params: { id: 'docs-example' },
      status: 200,
      replies: [json(replies.SessionReply)],
      examples: [{ name: 'read' }],
    },
    'GET /api/chat/sessions': {
      summary: 'Your sessions, most recent first',
      tag: 'Sessions',
      access: 'caller',
      query: [{ name: 'limit', description: 'At most this many (default 100).', schema: { type: 'integer', minimum: 1, maximum: 1000 } }],
      status: 200,
      replies: [json(replies.SessionsReply)],
      examples: [{ name: 'list' }],
    },
    'GET /api/chat/quota/:user_id': {
      summary: "A user's quota (your own, or anyone's for the admin)",
      tag: 'Quota',
      access: 'caller',
      params: { user_id: 'bob' },
      status: 200,
      replies: [json(replies.QuotaReply)],
      examples: [{ name: 'quota' }],
    },
    'GET /api/usage': {
      summary: 'Your usage totals over a period (the admin: anyone’s with user_id, or everyone’s)',
      tag: 'Quota',
      access: 'caller',
      query: [
        { name: 'from', description: 'Start (a date or ISO 8601 time; default 30 days before `to`).', schema: { type: 'string' } },
        { name: 'to', description: 'End, exclusive (a date counts whole; default now).', schema: { type: 'string' } },
        { name: 'group_by', description: '`day` (default), `model` or `key`.', schema: { type: 'string', enum: ['day', 'model', 'key'] } },
        { name: 'user_id', description: 'Whose usage (the admin only; leave out for everyone).', schema: { type: 'string' } },
      ],
      status: 200,
      replies: [json(replies.UsageReply)],
      examples: [{ name: 'by day' }, { name: 'by model', query: { group_by: 'model' } }],
    },
    'POST /v1/chat/completions': {
      summary: 'OpenAI-compatible chat completion (stream: true for chat.completion.chunk events)',
      description: 'Errors under /v1 use OpenAI’s shape. Extension fields: session_id, rag, web_search, language.',
      tag: 'OpenAI-compatible',
      access: 'caller',
      body: CompletionRequestSchema,
      status: 200,
      quota: true,
      replies: [json(replies.CompletionReply), { kind: 'sse', events: replies.CompletionSseEvents, named: false }],
      examples: [
        { name: 'completion', body: completion },
        { name: 'streamed completion', body: { ...completion, stream: true, stream_options: { include_usage: true } } },
      ],
    },
    'GET /v1/models': {
      summary: 'OpenAI-compatible model list',
      tag: 'OpenAI-compatible',
      access: 'caller',
      status: 200,
      replies: [json(replies.OpenAiModelsReply)],
      examples: [{ name: 'models' }],
    },
    'GET /v1/models/:id': {
      summary: 'One model',
      tag: 'OpenAI-compatible',
      access: 'caller',
      params: { id: 'builtin-extractive' },
      status: 200,
      replies: [json(replies.OpenAiModelReply)],
      examples: [{ name: 'model' }],
    },
    'POST /v1/embeddings': {
      summary: 'OpenAI-compatible embeddings through the rag.embeddings upstream (404 without one)',
      tag: 'OpenAI-compatible',
      access: 'caller',
      body: EmbeddingsSchema,
      status: 200,
      quota: true,
      replies: [json(replies.EmbeddingsReply)],
      examples: [
        { name: 'floats', body: { model: 'text-embedding-3-small', input: ['green tea', 'espresso'], encoding_format: 'float' } },
        { name: 'base64', body: { model: 'text-embedding-3-small', input: 'green tea' } },
      ],
    },
    'DELETE /api/chat/session/:id': {
      summary: 'Delete one of your sessions',
      tag: 'Sessions',
      access: 'caller',
      params: { id: 'docs-example' },
      status: 200,
      replies: [json(replies.DeletedSessionReply)],
      examples: [{ name: 'delete' }],
    },
    'DELETE /api/rag/documents/:document_id': {
      summary: 'Delete a document',
      description: ADMIN_NOTE,
      tag: 'Knowledge base',
      access: 'admin',
      params: { document_id: 'doc_0123456789abcdef01234567' },
      status: 200,
      replies: [json(replies.DeletedDocumentReply)],
      examples: [{ name: 'delete' }],
    },
    'DELETE /api/rag/documents': {
      summary: 'Delete a whole collection',
      description: ADMIN_NOTE,
      tag: 'Knowledge base',
      access: 'admin',
      query: [{ name: 'collection', description: 'The collection to delete (required).', schema: { type: 'string' } }],
      status: 200,
      replies: [json(replies.DeletedCollectionReply)],
      examples: [{ name: 'delete collection', query: { collection: 'examples' } }],
    },
  };
}
