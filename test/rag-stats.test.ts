/**
 * RAG end to end: chat with `rag` cites document sources, and GET /api/chat/rag/stats reports real
 * counters after a known sequence of operations, also after a restart on the same data directory;
 * the same counters on both storage engines (LMDB and Redis) through the KnowledgeBase itself.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { KnowledgeBase, RagStats } from '../src/rag/knowledge-base.js';
import { ENGINES, engineStore, type EngineStore } from './helpers/knowledge.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'rag-stats-admin-token-0123456789';
const auth = { authorization: `Bearer ${ADMIN}` };

/** The statistics of a knowledge base nothing was indexed in or asked of (all but index_bytes). */
const EMPTY_STATS = {
  documents: 0,
  chunks: 0,
  collections: 0,
  queries: 0,
  hit_rate: 0,
  avg_retrieval_ms: 0,
  last_indexed: null,
  retriever: { kind: 'bm25' },
};

interface ChatReply {
  response: string;
  model: string;
  sources?: Array<{ index: number; kind: string; title: string; url?: string; snippet: string }>;
}

/** Parses an SSE body into [event, data] pairs. */
function sseEvents(text: string): Array<[string, unknown]> {
  const events: Array<[string, unknown]> = [];
  for (const block of text.split('\n\n')) {
    const event = /^event: (.+)$/m.exec(block)?.[1];
    const data = /^data: (.+)$/m.exec(block)?.[1];
    if (event && data) events.push([event, JSON.parse(data)]);
  }
  return events;
}

describe('RAG in chat and its statistics', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-rag-stats-'));
  let server: TestServer;
  const boot = () => bootServer({ dataDir, env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
  const stats = async () => {
    const response = await server.fetch('/api/chat/rag/stats');
    assert.equal(response.status, 200);
    return (await response.json()) as RagStats;
  };

  before(async () => {
    server = await boot();
  });

  after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('reports an empty knowledge base before anything is indexed', async () => {
    const { index_bytes: indexBytes, ...rest } = await stats();
    // The sub-databases exist (and take a few pages) from the start.
    assert.ok(Number.isInteger(indexBytes) && indexBytes >= 0);
    assert.deepEqual(rest, EMPTY_STATS);
  });

  it('answers a rag chat with document sources and a [1] citation from the built-in model', async () => {
    for (const document of [
      {
        title: 'Harbour guide',
        text: 'The harbour master opens the lock gates two hours before high water.',
        url: 'https://docs.example/harbour',
        collection: 'port',
      },
      {
        title: 'Bakery notes',
        text: 'Rye bread needs a longer proof than wheat bread because rye has little gluten.',
        collection: 'kitchen',
      },
    ]) {
      assert.equal((await server.post('/api/rag/documents', document, auth)).status, 201);
    }
    const response = await server.post('/api/chat/', { message: 'When does the harbour master open the lock gates?', rag: true });
    assert.equal(response.status, 200, await response.clone().text());
    const body = (await response.json()) as ChatReply;
    assert.equal(body.model, 'builtin-extractive');
    assert.equal(body.sources?.[0]?.kind, 'document');
    assert.equal(body.sources?.[0]?.title, 'Harbour guide');
    assert.equal(body.sources?.[0]?.url, 'https://docs.example/harbour');
    assert.match(body.response, /\[1\]/);
  });

  it('streams the sources event before the first delta when rag names a collection', async () => {
    const response = await server.post('/api/chat/stream', {
      message: 'Why does rye bread need a longer proof?',
      rag: { top_k: 2, collection: 'kitchen' },
    });
    assert.equal(response.status, 200);
    const events = sseEvents(await response.text());
    const names = events.map(([event]) => event);
    const sourcesAt = names.indexOf('sources');
    assert.ok(sourcesAt >= 0, `events: ${names.join(',')}`);
    assert.ok(sourcesAt < names.indexOf('delta'));
    const sources = (events[sourcesAt]![1] as { sources: Array<{ kind: string; title: string }> }).sources;
    assert.deepEqual(
      sources.map((source) => [source.kind, source.title]),
      [['document', 'Bakery notes']],
    );
  });

  it('counts queries, the share with a result above the threshold, and the retrieval time', async () => {
    const miss = await server.post('/api/chat/', { message: 'Tell me about quantum chromodynamics', rag: true });
    assert.equal(miss.status, 200);
    assert.deepEqual(((await miss.json()) as ChatReply).sources ?? [], []);

    const figures = await stats();
    assert.equal(figures.documents, 2);
    assert.equal(figures.chunks, 2);
    assert.equal(figures.collections, 2);
    assert.ok(figures.index_bytes > 0);
    assert.equal(figures.queries, 3);
    assert.equal(figures.hit_rate, 0.6667);
    assert.ok(figures.avg_retrieval_ms > 0);
    assert.ok(figures.last_indexed && !Number.isNaN(Date.parse(figures.last_indexed)));
    assert.deepEqual(figures.retriever, { kind: 'bm25' });
  });

  it('keeps every counter across a restart on the same data directory', async () => {
    const before = await stats();
    await server.close();
    server = await boot();
    const after = await stats();
    assert.deepEqual(after, before);
    // And keeps counting from there.
    await server.post('/api/chat/', { message: 'lock gates harbour', rag: true });
    const more = await stats();
    assert.equal(more.queries, 4);
    assert.equal(more.hit_rate, 0.75);
  });
});

for (const engine of ENGINES) {
  describe(`retrieval statistics on ${engine}`, () => {
    let store: EngineStore;
    let knowledge: KnowledgeBase;

    before(async () => {
      store = await engineStore(engine);
      knowledge = await store.open({ minScore: 0.5 });
    });

    after(() => store.close());

    it('reports an empty knowledge base before anything is indexed', async () => {
      const { index_bytes: indexBytes, ...rest } = await knowledge.stats();
      assert.ok(Number.isInteger(indexBytes) && indexBytes >= 0);
      assert.deepEqual(rest, EMPTY_STATS);
    });

    it('counts queries, the share with a result above the threshold, and the retrieval time', async () => {
      await knowledge.add({
        title: 'Harbour guide',
        text: 'The harbour master opens the lock gates two hours before high water.',
        collection: 'port',
      });
      await knowledge.add({
        title: 'Bakery notes',
        text: 'Rye bread needs a longer proof than wheat bread because rye has little gluten.',
        collection: 'kitchen',
      });
      assert.equal((await knowledge.retrieve('When does the harbour master open the lock gates?', { topK: 3 }))[0]?.title, 'Harbour guide');
      assert.equal(
        (await knowledge.retrieve('Why does rye bread need a longer proof?', { topK: 2, collection: 'kitchen' }))[0]?.title,
        'Bakery notes',
      );
      assert.deepEqual(await knowledge.retrieve('Tell me about quantum chromodynamics', { topK: 3 }), []);
      await knowledge.flushCounters();
      const figures = await knowledge.stats();
      assert.equal(figures.documents, 2);
      assert.equal(figures.chunks, 2);
      assert.equal(figures.collections, 2);
      assert.ok(figures.index_bytes > 0);
      assert.equal(figures.queries, 3);
      assert.equal(figures.hit_rate, 0.6667);
      assert.ok(figures.avg_retrieval_ms > 0);
      assert.ok(figures.last_indexed && !Number.isNaN(Date.parse(figures.last_indexed)));
      assert.deepEqual(figures.retriever, { kind: 'bm25' });
    });

    it('keeps every counter when the knowledge base is opened again on the same storage', async () => {
      const before = await knowledge.stats();
      await knowledge.close();
      knowledge = await store.open({ minScore: 0.5 });
      const { index_bytes: _bytes, ...after } = await knowledge.stats();
      const { index_bytes: _before, ...expected } = before;
      assert.deepEqual(after, expected);
      await knowledge.retrieve('lock gates harbour', { topK: 3 });
      await knowledge.flushCounters();
      const more = await knowledge.stats();
      assert.equal(more.queries, 4);
      assert.equal(more.hit_rate, 0.75);
    });
  });
}
