/**
 * The knowledge base over HTTP: admin-only ingestion, listing and deletion of documents, and the
 * retrieval statistics any caller may read. Every ingestion handler checks the admin token before
 * reading the body, so without it nothing about the corpus can be probed.
 */
import * as v from 'valibot';
import { parseWith } from '../auth/validation.js';
import { ApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import { NO_STORE } from './headers.js';
import { COLLECTION_PATTERN, DEFAULT_COLLECTION } from '../rag/knowledge-base.js';
import type { Services } from '../services.js';
import { nextAfter, pageQuery } from './paging.js';
import { identify, requireAdmin } from './admit.js';

const DOCUMENT_ID_PATTERN = /^doc_[0-9a-f]{24}$/;

const CollectionSchema = v.pipe(v.string(), v.regex(COLLECTION_PATTERN, 'must be 1-64 letters, digits, "_" or "-"'));

export const IngestBody = v.strictObject({
  title: v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'), v.maxLength(300, 'must be at most 300 characters')),
  text: v.pipe(
    v.string(),
    v.check((text) => text.trim().length > 0, 'must not be empty'),
  ),
  url: v.optional(v.pipe(v.string(), v.maxLength(2048, 'must be at most 2048 characters'), v.url('must be an absolute URL'))),
  collection: v.optional(CollectionSchema),
  format: v.optional(v.picklist(['text', 'markdown', 'html'], 'must be one of text, markdown, html')),
});

/** A collection named in the query string, validated; undefined when absent. */
function collectionFromQuery(context: HttpContext): string | undefined {
  const value = context.request.query.get('collection');
  if (value === null) return undefined;
  if (!COLLECTION_PATTERN.test(value)) {
    throw new ApiError('invalid_request', undefined, {
      details: [{ path: 'collection', message: 'must be 1-64 letters, digits, "_" or "-"' }],
    });
  }
  return value;
}

/** The RAG route group: /api/rag/documents (admin), /api/rag/collections and /api/chat/rag/stats. */
export function ragRoutes(services: Services): Route[] {
  const knowledge = services.knowledge;
  const maxBytes = services.config.rag.maxDocumentBytes;

  const requireCollection = (name: string) => {
    if (!knowledge.hasCollection(name)) throw new ApiError('not_found', `No collection named "${name}".`);
  };

  return [
    {
      method: 'POST',
      path: '/api/rag/documents',
      handler: async (context) => {
        await requireAdmin(services, context);
        const body = parseWith(IngestBody, await context.readJson());
        const bytes = Buffer.byteLength(body.text, 'utf8');
        if (bytes > maxBytes) {
          throw new ApiError(
            'payload_too_large',
            `The document text is ${bytes} bytes; the limit is ${maxBytes} bytes (rag.max_document_bytes).`,
          );
        }
        const result = await knowledge.add(
          { title: body.title, text: body.text, url: body.url, collection: body.collection ?? DEFAULT_COLLECTION, format: body.format },
          context.signal,
        );
        context.json(
          201,
          {
            document_id: result.document_id,
            chunks: result.chunks,
            collection: result.collection,
            title: result.title,
            replaced: result.replaced,
          },
          NO_STORE,
        );
      },
    },
    {
      method: 'GET',
      path: '/api/rag/documents',
      handler: async (context) => {
        await requireAdmin(services, context);
        const collection = collectionFromQuery(context);
        const { limit, after } = pageQuery(context.request.query, DOCUMENT_ID_PATTERN);
        if (collection !== undefined) requireCollection(collection);
        const documents = knowledge.list({ collection, limit, after });
        const page = nextAfter(documents, limit, (document) => document.document_id);
        context.json(200, { documents, collections: knowledge.collections(), ...page }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/rag/documents/:document_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        const id = context.request.params.document_id ?? '';
        const document = DOCUMENT_ID_PATTERN.test(id) ? knowledge.get(id) : undefined;
        if (!document) throw new ApiError('not_found', 'No document with this id.');
        context.json(200, document, NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: '/api/rag/documents/:document_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        const id = context.request.params.document_id ?? '';
        const collection = collectionFromQuery(context);
        if (collection !== undefined) requireCollection(collection);
        if (!DOCUMENT_ID_PATTERN.test(id) || !knowledge.remove(id, collection)) {
          throw new ApiError(
            'not_found',
            collection === undefined ? 'No document with this id.' : `No document with this id in collection "${collection}".`,
          );
        }
        context.json(200, { document_id: id, deleted: true }, NO_STORE);
      },
    },
    {
      method: 'DELETE',
      path: '/api/rag/documents',
      handler: async (context) => {
        await requireAdmin(services, context);
        const collection = collectionFromQuery(context);
        if (collection === undefined) {
          throw new ApiError('invalid_request', 'Name the collection to delete with ?collection=NAME.', {
            details: [{ path: 'collection', message: 'is required' }],
          });
        }
        requireCollection(collection);
        const deleted = knowledge.removeCollection(collection);
        context.json(200, { collection, deleted_documents: deleted }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/rag/collections',
      handler: async (context) => {
        // Names and counts only, so a caller can pick a collection for `rag`; the documents stay admin-only.
        await identify(services, context);
        context.json(200, { collections: knowledge.collections() }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/chat/rag/stats',
      handler: async (context) => {
        // Any caller (an anonymous one too, unless keys are required) may read the figures; not quota-counted.
        await identify(services, context);
        context.json(200, knowledge.stats(), NO_STORE);
      },
    },
  ];
}
