/**
 * The knowledge base over HTTP: admin-only ingestion (rag-upload.ts), listing and deletion of documents, and the
 * retrieval statistics any caller may read. Every ingestion handler checks the admin token before
 * reading the body, so without it nothing about the corpus can be probed.
 */
import { ApiError } from '../errors.js';
import type { HttpContext, Route } from '../http/types.js';
import { NO_STORE } from './headers.js';
import { COLLECTION_PATTERN } from '../rag/knowledge-base.js';
import type { Services } from '../services.js';
import { nextAfter, pageQuery } from './paging.js';
import { identify, requireAdmin } from './admit.js';
import { ingestDocuments, uploadBodyLimit } from './rag-upload.js';

const DOCUMENT_ID_PATTERN = /^doc_[0-9a-f]{24}$/;

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

  const requireCollection = async (name: string) => {
    if (!(await knowledge.hasCollection(name))) throw new ApiError('not_found', `No collection named "${name}".`);
  };

  return [
    {
      method: 'POST',
      path: '/api/rag/documents',
      maxBodyBytes: uploadBodyLimit(services),
      handler: async (context) => {
        await requireAdmin(services, context);
        await ingestDocuments(services, context);
      },
    },
    {
      method: 'GET',
      path: '/api/rag/documents',
      handler: async (context) => {
        await requireAdmin(services, context);
        const collection = collectionFromQuery(context);
        const { limit, after } = pageQuery(context.request.query, DOCUMENT_ID_PATTERN);
        if (collection !== undefined) await requireCollection(collection);
        const documents = await knowledge.list({ collection, limit, after });
        const page = nextAfter(documents, limit, (document) => document.document_id);
        context.json(200, { documents, collections: await knowledge.collections(), ...page }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/rag/documents/:document_id',
      handler: async (context) => {
        await requireAdmin(services, context);
        const id = context.request.params.document_id ?? '';
        const document = DOCUMENT_ID_PATTERN.test(id) ? await knowledge.get(id) : undefined;
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
        if (collection !== undefined) await requireCollection(collection);
        if (!DOCUMENT_ID_PATTERN.test(id) || !(await knowledge.remove(id, collection))) {
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
        await requireCollection(collection);
        const deleted = await knowledge.removeCollection(collection);
        context.json(200, { collection, deleted_documents: deleted }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/rag/collections',
      handler: async (context) => {
        // Names and counts only, so a caller can pick a collection for `rag`; the documents stay admin-only.
        await identify(services, context);
        context.json(200, { collections: await knowledge.collections() }, NO_STORE);
      },
    },
    {
      method: 'GET',
      path: '/api/chat/rag/stats',
      handler: async (context) => {
        // Any caller (an anonymous one too, unless keys are required) may read the figures; not quota-counted.
        await identify(services, context);
        context.json(200, await knowledge.stats(), NO_STORE);
      },
    },
  ];
}
