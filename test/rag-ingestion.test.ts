/** The admin ingestion routes: validation errors, size limits, replacing, listing and deleting. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'rag-ingestion-admin-token-0123456789';
const auth = { authorization: `Bearer ${ADMIN}` };

interface ErrorReply {
  error: { code: string; message: string; details?: Array<{ path: string; message: string }> };
}

describe('RAG ingestion routes', () => {
  let server: TestServer;

  before(async () => {
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN },
      config: { rag: { max_document_bytes: 4096, chunk_size: 200, chunk_overlap: 40 } },
    });
  });

  after(() => server.close());

  const ingest = (body: unknown, headers: Record<string, string> = auth) => server.post('/api/rag/documents', body, headers);
  const remove = (path: string) => server.fetch(path, { method: 'DELETE', headers: auth });

  it('refuses ingestion without the admin token', async () => {
    const anonymous = await ingest({ title: 'x', text: 'Some text.' }, {});
    assert.equal(anonymous.status, 401);
    const wrong = await ingest({ title: 'x', text: 'Some text.' }, { authorization: 'Bearer not-the-admin-token' });
    assert.ok(wrong.status === 401 || wrong.status === 403, `status ${wrong.status}`);
    const list = await server.fetch('/api/rag/documents');
    assert.equal(list.status, 401);
  });

  it('answers 400 invalid_request naming the field for empty text, a missing title and a bad collection', async () => {
    const empty = await ingest({ title: 'Empty', text: '   \n ' });
    assert.equal(empty.status, 400);
    const emptyBody = (await empty.json()) as ErrorReply;
    assert.equal(emptyBody.error.code, 'invalid_request');
    assert.deepEqual(
      emptyBody.error.details?.map((detail) => detail.path),
      ['text'],
    );

    const noTitle = (await (await ingest({ text: 'Hello there.' })).json()) as ErrorReply;
    assert.deepEqual(
      noTitle.error.details?.map((detail) => detail.path),
      ['title'],
    );

    const badCollection = (await (await ingest({ title: 't', text: 'Hello.', collection: 'no spaces/allowed' })).json()) as ErrorReply;
    assert.deepEqual(
      badCollection.error.details?.map((detail) => detail.path),
      ['collection'],
    );

    const unknownField = await ingest({ title: 't', text: 'Hello.', author: 'me' });
    assert.equal(unknownField.status, 400);
  });

  it('answers 400 when an HTML document has no visible text', async () => {
    const response = await ingest({
      title: 'Only script',
      text: '<html><script>var a = 1;</script><style>p{}</style></html>',
      format: 'html',
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as ErrorReply;
    assert.deepEqual(
      body.error.details?.map((detail) => detail.path),
      ['text'],
    );
  });

  it('answers 413 payload_too_large for a document over rag.max_document_bytes, naming the limit', async () => {
    const response = await ingest({ title: 'Huge', text: 'word '.repeat(1000) });
    assert.equal(response.status, 413);
    const body = (await response.json()) as ErrorReply;
    assert.equal(body.error.code, 'payload_too_large');
    assert.match(body.error.message, /4096 bytes/);
    // Nothing of it was indexed.
    assert.deepEqual(await server.services.knowledge.retrieve('word', { topK: 3 }), []);
  });

  it('re-ingesting the same document replaces it instead of adding a copy', async () => {
    const first = await ingest({
      title: 'Kettles',
      text: 'An electric kettle switches off with a bimetallic strip when the water boils.',
      url: 'https://docs.example/kettles',
      collection: 'home',
    });
    assert.equal(first.status, 201);
    const firstBody = (await first.json()) as { document_id: string; chunks: number; replaced: boolean };
    assert.equal(firstBody.replaced, false);
    assert.equal(firstBody.chunks, 1);

    const second = await ingest({
      title: 'Kettles (revised)',
      text: 'A stovetop kettle whistles when steam escapes through its spout.',
      url: 'https://docs.example/kettles',
      collection: 'home',
    });
    assert.equal(second.status, 201);
    const secondBody = (await second.json()) as { document_id: string; replaced: boolean };
    assert.equal(secondBody.document_id, firstBody.document_id);
    assert.equal(secondBody.replaced, true);

    const list = (await (await server.fetch('/api/rag/documents?collection=home', { headers: auth })).json()) as {
      documents: Array<{ document_id: string; title: string }>;
    };
    assert.deepEqual(
      list.documents.map((document) => document.title),
      ['Kettles (revised)'],
    );
    assert.deepEqual(await server.services.knowledge.retrieve('bimetallic strip', { topK: 3 }), []);
    const found = await server.services.knowledge.retrieve('whistles steam spout', { topK: 3 });
    assert.equal(found[0]?.documentId, firstBody.document_id);
  });

  it('splits a long document into overlapping chunks and lists it with its chunk count', async () => {
    const paragraphs = Array.from(
      { length: 6 },
      (_, index) => `Paragraph ${index} describes the harbour crane number ${index}. It lifts containers from ships onto trucks.`,
    );
    const response = await ingest({ title: 'Cranes', text: paragraphs.join('\n\n'), collection: 'port' });
    const body = (await response.json()) as { document_id: string; chunks: number };
    assert.ok(body.chunks >= 3, `got ${body.chunks} chunks`);
    const one = (await (await server.fetch(`/api/rag/documents/${body.document_id}`, { headers: auth })).json()) as {
      chunks: number;
      collection: string;
    };
    assert.equal(one.chunks, body.chunks);
    assert.equal(one.collection, 'port');
  });

  it('deleting a document removes it from results, listings and stats', async () => {
    const created = (await (
      await ingest({ title: 'Sundials', text: 'A sundial tells the time from the shadow cast by its gnomon.', collection: 'time' })
    ).json()) as { document_id: string };
    const before = (await (await server.fetch('/api/chat/rag/stats')).json()) as { documents: number; chunks: number; collections: number };
    assert.equal((await server.services.knowledge.retrieve('gnomon shadow', { topK: 3 }))[0]?.documentId, created.document_id);

    const deleted = await remove(`/api/rag/documents/${created.document_id}`);
    assert.equal(deleted.status, 200);
    assert.deepEqual(await deleted.json(), { document_id: created.document_id, deleted: true });

    assert.deepEqual(await server.services.knowledge.retrieve('gnomon shadow', { topK: 3 }), []);
    const afterStats = (await (await server.fetch('/api/chat/rag/stats')).json()) as {
      documents: number;
      chunks: number;
      collections: number;
    };
    assert.equal(afterStats.documents, before.documents - 1);
    assert.equal(afterStats.chunks, before.chunks - 1);
    assert.equal(afterStats.collections, before.collections - 1, 'the emptied collection is gone');
    assert.equal((await remove(`/api/rag/documents/${created.document_id}`)).status, 404);
  });

  it('answers 404 when deleting from an unknown collection or a document of another collection', async () => {
    const created = (await (
      await ingest({ title: 'Abacus', text: 'The abacus uses beads on rods for arithmetic.', collection: 'maths' })
    ).json()) as { document_id: string };
    const unknown = await remove(`/api/rag/documents/${created.document_id}?collection=no-such-collection`);
    assert.equal(unknown.status, 404);
    assert.match(((await unknown.json()) as ErrorReply).error.message, /no-such-collection/);
    await ingest({ title: 'Other', text: 'Something else entirely.', collection: 'other' });
    assert.equal((await remove(`/api/rag/documents/${created.document_id}?collection=other`)).status, 404);
    assert.equal((await remove('/api/rag/documents?collection=no-such-collection')).status, 404);
    // Still there.
    assert.equal((await server.fetch(`/api/rag/documents/${created.document_id}`, { headers: auth })).status, 200);
  });

  it('deletes a whole collection', async () => {
    await ingest({ title: 'A', text: 'Alpha document about anemometers.', collection: 'weather' });
    await ingest({ title: 'B', text: 'Beta document about barometers.', collection: 'weather' });
    const response = await remove('/api/rag/documents?collection=weather');
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { collection: 'weather', deleted_documents: 2 });
    assert.deepEqual(await server.services.knowledge.retrieve('barometers anemometers', { topK: 3 }), []);
    assert.equal((await server.fetch('/api/rag/documents?collection=weather', { headers: auth })).status, 404);
  });

  it('pages through the document list with limit and next_after', async () => {
    for (const name of ['p1', 'p2', 'p3']) await ingest({ title: name, text: `Paged document ${name}.`, collection: 'paged' });
    const page1 = (await (await server.fetch('/api/rag/documents?collection=paged&limit=2', { headers: auth })).json()) as {
      documents: Array<{ document_id: string }>;
      next_after?: string;
    };
    assert.equal(page1.documents.length, 2);
    assert.ok(page1.next_after);
    const page2 = (await (
      await server.fetch(`/api/rag/documents?collection=paged&limit=2&after=${page1.next_after}`, { headers: auth })
    ).json()) as { documents: Array<{ document_id: string }>; next_after?: string };
    assert.equal(page2.documents.length, 1);
    assert.equal(page2.next_after, undefined);
    const all = new Set([...page1.documents, ...page2.documents].map((document) => document.document_id));
    assert.equal(all.size, 3);
  });
});
