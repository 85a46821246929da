/**
 * GET /openapi.json (OpenAPI 3.1) and GET /docs (the document as a reference page, Swagger UI
 * served from the installed package, so it works offline). The document is generated from the
 * valibot schemas the routes validate with and the reply schemas in openapi-replies.ts; every
 * operation of the router is described (building the document fails otherwise), and a test sends
 * each documented example to the real server and checks the reply against its schema.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { toJsonSchema } from '@valibot/to-json-schema';
import { ApiError } from '../errors.js';
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';
import { type Json, operations, type Reply, type Schema } from './openapi-operations.js';
import * as replies from './openapi-replies.js';

const JSON_SCHEMA_OPTIONS = { target: 'draft-2020-12', errorMode: 'ignore' } as const;

/** A valibot schema as JSON Schema (draft 2020-12, OpenAPI 3.1's dialect), without its `$schema`. */
function jsonSchema(schema: Schema): Json {
  const converted = toJsonSchema(schema, JSON_SCHEMA_OPTIONS) as Json;
  delete converted.$schema;
  return converted;
}

function mediaFor(reply: Reply): [string, Json] {
  switch (reply.kind) {
    case 'json':
      return ['application/json', { schema: jsonSchema(reply.schema) }];
    case 'text':
      return [reply.contentType, { schema: { type: 'string' } }];
    case 'sse':
      return [
        'text/event-stream',
        {
          schema: {
            type: 'string',
            description: reply.named
              ? 'Server-Sent Events; each event’s `data` is JSON of the schema named by its `event:` field (x-events).'
              : 'Server-Sent Events of unnamed `data:` lines: JSON chunks (x-events.chunk), an error (x-events.error), then `data: [DONE]`.',
          },
          'x-events': Object.fromEntries(Object.entries(reply.events).map(([name, schema]) => [name, jsonSchema(schema)])),
        },
      ];
    case 'ndjson':
      return [
        'application/x-ndjson',
        {
          schema: { type: 'string', description: 'One JSON object per line; each line’s schema is named by its `type` field (x-events).' },
          'x-events': Object.fromEntries(Object.entries(reply.lines).map(([name, schema]) => [name, jsonSchema(schema)])),
        },
      ];
  }
}

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': { description: 'Requests the plan allows per window.', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the window.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
};

/** The OpenAPI path of a router template (`/api/keys/:key_id` → `/api/keys/{key_id}`). */
function openApiPath(template: string): string {
  return template.replace(/:([A-Za-z_]+)/g, '{$1}');
}

/** Routes that are pages rather than API operations. */
function isUndocumented(route: Route): boolean {
  return route.path.startsWith('/dashboard') || route.path === '/docs' || route.path.startsWith('/docs/');
}

/** The OpenAPI 3.1 document for `routes`; throws when a route and the description disagree. */
export function openApiDocument(routes: readonly Route[], planNames: string[], version: string): Json {
  const described = operations(planNames);
  const paths: Record<string, Record<string, Json>> = {};
  const seen = new Set<string>();
  const keys = Object.keys(described);
  for (const route of routes) {
    if (isUndocumented(route)) continue;
    const key = `${route.method} ${route.path}`;
    const operation = described[key];
    if (!operation) throw new Error(`the OpenAPI description has no entry for ${key}`);
    seen.add(key);
    const path = openApiPath(route.path);
    const isV1 = route.path.startsWith('/v1/');
    const errorSchema = jsonSchema(isV1 ? replies.OpenAiErrorReply : replies.ErrorReply);
    const parameters: Json[] = [];
    for (const name of route.path.match(/:([A-Za-z_]+)/g) ?? []) {
      const param = name.slice(1);
      parameters.push({ name: param, in: 'path', required: true, schema: { type: 'string' }, example: operation.params?.[param] });
    }
    for (const query of operation.query ?? [])
      parameters.push({ name: query.name, in: 'query', required: false, description: query.description, schema: query.schema });
    const content = Object.fromEntries(operation.replies.map(mediaFor));
    const entry: Json = {
      operationId: `${route.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_match, next: string | undefined) => (next ?? '').toUpperCase())}`,
      summary: operation.summary,
      ...(operation.description ? { description: operation.description } : {}),
      tags: [operation.tag],
      security: operation.access === 'open' ? [] : operation.access === 'admin' ? [{ bearer: [] }] : [{}, { bearer: [] }],
      ...(parameters.length > 0 ? { parameters } : {}),
      responses: {
        [String(operation.status)]: {
          description: operation.summary,
          ...(operation.quota ? { headers: RATE_LIMIT_HEADERS } : {}),
          content,
        },
        '4XX': {
          description: 'A refused request (docs/errors.md lists every code).',
          content: { 'application/json': { schema: errorSchema } },
        },
        '5XX': { description: 'A failure on our side or upstream.', content: { 'application/json': { schema: errorSchema } } },
      },
      'x-order': keys.indexOf(key),
      'x-examples': operation.examples,
    };
    if (operation.body) {
      entry.requestBody = {
        required: true,
        content: {
          'application/json': {
            schema: jsonSchema(operation.body),
            example: operation.examples.find((example) => example.body !== undefined)?.body,
          },
          ...(operation.upload ? { 'multipart/form-data': { schema: operation.upload } } : {}),
        },
      };
    }
    paths[path] ??= {};
    (paths[path] as Record<string, Json>)[route.method.toLowerCase()] = entry;
  }
  const missing = keys.filter((key) => !seen.has(key));
  if (missing.length > 0) throw new Error(`the OpenAPI description names routes that do not exist: ${missing.join(', ')}`);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Colloquy',
      version,
      description:
        'A self-hostable conversational AI API server: chat as JSON, Server-Sent Events or NDJSON progress, web search with citations, a knowledge base, images, sessions, per-user quotas, and an OpenAI-compatible /v1 surface.',
    },
    servers: [{ url: '/' }],
    tags: ['Chat', 'OpenAI-compatible', 'Sessions', 'Quota', 'Knowledge base', 'Images', 'Keys', 'Admin', 'Operations'].map((name) => ({
      name,
    })),
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An API key (`ck_…`), or the admin token on admin routes.' },
      },
    },
    paths,
  };
}

/** The /docs page: Swagger UI from the installed package, started by a same-origin script (the CSP allows no inline code). */
const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Colloquy API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/start.js"></script>
</body>
</html>
`;

const START_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', deepLinking: true, tryItOutEnabled: false });
});
`;

/** Swagger UI sets inline styles on its elements; nothing else is loosened. */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** The OpenAPI document and the reference page. */
export function openApiRoutes(services: Services, routes: readonly Route[]): Route[] {
  const resolve = createRequire(import.meta.url).resolve;
  const assets = new Map<string, { type: string; body: Buffer }>([
    ['swagger-ui.css', { type: 'text/css; charset=utf-8', body: readFileSync(resolve('swagger-ui-dist/swagger-ui.css')) }],
    [
      'swagger-ui-bundle.js',
      { type: 'text/javascript; charset=utf-8', body: readFileSync(resolve('swagger-ui-dist/swagger-ui-bundle.js')) },
    ],
    ['start.js', { type: 'text/javascript; charset=utf-8', body: Buffer.from(START_SCRIPT) }],
  ]);
  const pageHeaders = { 'Content-Security-Policy': DOCS_CSP, 'Cache-Control': 'no-cache' };
  let body = '';
  const own: Route[] = [
    {
      method: 'GET',
      path: '/openapi.json',
      handler: (context) => context.send(200, 'application/json', body, { 'Cache-Control': 'no-cache' }),
    },
    { method: 'GET', path: '/docs', handler: (context) => context.send(200, 'text/html; charset=utf-8', DOCS_PAGE, pageHeaders) },
    {
      method: 'GET',
      path: '/docs/assets/:name',
      handler: (context) => {
        const asset = assets.get(context.request.params.name ?? '');
        if (!asset) throw new ApiError('not_found', 'No such documentation asset.');
        context.send(200, asset.type, asset.body, pageHeaders);
      },
    },
  ];
  // Built once, from every route including these: a route without a description stops the start.
  body = JSON.stringify(openApiDocument([...routes, ...own], Object.keys(services.config.plans), services.config.version));
  return own;
}
