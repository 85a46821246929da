/**
 * The knowledge base on Redis against the one on LMDB: the same corpus ranks identically, nodes
 * sharing one Redis see each other's documents and counters at once, deletes and replacements
 * keep document frequencies exact, documents move between the engines by export and import, and
 * a Redis that goes away turns calls into 503 `unavailable` until it returns.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ApiError } from '../src/errors.js';
import { formatFromFileName } from '../src/rag/extract.js';
import type { Embedder } from '../src/rag/embeddings.js';
import type { DocumentInput, KnowledgeBase } from '../src/rag/knowledge-base.js';
import type { Passage } from '../src/rag/types.js';
import { engineStore, type EngineStore } from './helpers/knowledge.js';

const FIXTURES = new URL('../../test/fixtures/rag/', import.meta.url);
const CORPUS = new URL('corpus/', FIXTURES);
const QUESTIONS = (JSON.parse(readFileSync(new URL('questions.json', FIXTURES), 'utf8')) as Array<{ question: string }>).map(
  (entry) => entry.question,
);

const CONCEPTS = [
  ['sea', 'ocean', 'water', 'wave', 'tide', 'ship', 'harbour'],
  ['music', 'instrument', 'violin', 'string', 'sound', 'play'],
  ['light', 'lighthouse', 'lamp', 'tower', 'beam'],
  ['bee', 'flower', 'honey', 'hive', 'pollen'],
];

function corpus(collection: string): DocumentInput[] {
  return readdirSync(CORPUS)
    .sort()
    .map((file) => ({
      title: file,
      text: readFileSync(new URL(file, CORPUS), 'utf8'),
      format: formatFromFileName(file) ?? 'text',
      collection,
    }));
}

async function answers(knowledge: KnowledgeBase, queries: readonly string[], collection?: string): Promise<Passage[][]> {
  const results: Passage[][] = [];
  for (const query of queries) results.push(await knowledge.retrieve(query, { topK: 5, ...(collection ? { collection } : {}) }));
  return results;
}

/** Adds documents one at a time, so both engines number chunks and segments alike. */
async function addEach(knowledge: KnowledgeBase, documents: readonly DocumentInput[]): Promise<void> {
  for (const document of documents) await knowledge.add(document);
}

describe('the knowledge base on Redis', () => {
  let lmdb: EngineStore;
  let redis: EngineStore;

  before(async () => {
    lmdb = await engineStore('lmdb');
    redis = await engineStore('redis');
  });

  after(async () => {
    await lmdb?.close();
    await redis?.close();
  });

  it('returns the same passages with the same scores as LMDB for the same corpus', async () => {
    const onLmdb = await lmdb.open();
    const onRedis = await redis.open();
    await addEach(onLmdb, corpus('ranking'));
    await addEach(onRedis, corpus('ranking'));
    await onLmdb.settle();
    await onRedis.settle();
    const expected = await answers(onLmdb, QUESTIONS, 'ranking');
    assert.ok(expected.filter((passages) => passages.length > 0).length >= 30, 'the questions find passages');
    assert.deepEqual(await answers(onRedis, QUESTIONS, 'ranking'), expected);
    assert.deepEqual(await answers(onRedis, QUESTIONS.slice(0, 5)), await answers(onLmdb, QUESTIONS.slice(0, 5)));
    assert.deepEqual(await onRedis.collections(), await onLmdb.collections());
    assert.deepEqual(
      (await onRedis.list({ collection: 'ranking', limit: 5, after: (await onLmdb.list({ limit: 1 }))[0]?.document_id })).map(
        (document) => document.document_id,
      ),
      (await onLmdb.list({ collection: 'ranking', limit: 5, after: (await onLmdb.list({ limit: 1 }))[0]?.document_id })).map(
        (document) => document.document_id,
      ),
    );
  });

  it('shows a document added through one node to another node at once, shares the counters and sees a delete at once', async () => {
    const first = await redis.open();
    const second = await redis.open();
    const before = await second.stats();
    const result = await first.add({ title: 'Quokka notes', text: 'The quokka lives on Rottnest Island near Perth.', collection: 'nodes' });
    const found = await second.retrieve('quokka Rottnest', { topK: 3, collection: 'nodes' });
    assert.equal(found[0]?.documentId, result.document_id);
    assert.equal((await second.get(result.document_id))?.title, 'Quokka notes');
    assert.equal(await second.hasCollection('nodes'), true);
    await first.retrieve('quokka', { topK: 3 });
    const after = await second.stats();
    assert.equal(after.queries, before.queries + 2);
    assert.equal(after.documents, before.documents + 1);
    assert.equal(await first.remove(result.document_id), true);
    assert.deepEqual(await second.retrieve('quokka Rottnest', { topK: 3, collection: 'nodes' }), []);
    assert.equal(await second.hasCollection('nodes'), false);
  });

  it('keeps document frequencies exact through replacements, deletes and merges (same scores as a fresh index of the final documents)', async () => {
    const live = await redis.open();
    const documents = corpus('churn');
    await live.addMany(documents);
    // Replace a few with other text and delete a few, through enough segments to merge.
    for (const [index, document] of documents.slice(0, 10).entries()) {
      await live.add({ ...document, text: `${document.text as string}\n\nRevised edition ${index}: lighthouses and bees.` });
    }
    const listed = await live.list({ collection: 'churn', limit: 100 });
    for (const document of listed.slice(10, 14)) assert.equal(await live.remove(document.document_id), true);
    await live.settle();
    assert.ok(live.mergedPostings > 0, 'segments were merged');
    assert.equal((await live.segmentCounts()).building, undefined);
    const fresh = await engineStore('redis');
    try {
      const rebuilt = await fresh.open();
      for await (const exported of live.exportDocuments()) await rebuilt.importDocument(exported);
      await rebuilt.settle();
      const queries = [...QUESTIONS.slice(0, 12), 'revised edition lighthouses bees'];
      const expected = await answers(rebuilt, queries, 'churn');
      const got = await answers(live, queries, 'churn');
      // The rebuilt index numbers chunks afresh, so passages of equal score may swap places.
      const scored = (results: Passage[][]) =>
        results.map((passages) => passages.map((passage) => `${passage.score} ${passage.chunkId}`).sort());
      assert.deepEqual(scored(got), scored(expected));
      const [liveStats, freshStats] = [await live.stats(), await rebuilt.stats()];
      assert.deepEqual([liveStats.documents, liveStats.chunks], [freshStats.documents, freshStats.chunks]);
    } finally {
      await fresh.close();
    }
  });

  it('lets two nodes ingest and merge at once on one Redis and still rank like an index rebuilt from the final documents', async () => {
    const store = await engineStore('redis');
    const fresh = await engineStore('redis');
    try {
      const [first, second] = [await store.open(), await store.open()];
      const documents = corpus('together');
      // One document per segment on both nodes at once: enough segments for several merges.
      await Promise.all([addEach(first, documents.slice(0, 16)), addEach(second, documents.slice(16))]);
      await Promise.all([first.settle(), second.settle()]);
      assert.ok(first.mergedPostings + second.mergedPostings > 0, 'segments were merged');
      const counts = await first.segmentCounts();
      assert.deepEqual(Object.keys(counts), ['live']);
      assert.ok((counts.live ?? 0) < documents.length);
      const rebuilt = await fresh.open();
      for await (const exported of first.exportDocuments()) await rebuilt.importDocument(exported);
      const scored = (results: Passage[][]) =>
        results.map((passages) => passages.map((passage) => `${passage.score} ${passage.documentId}`).sort());
      assert.deepEqual(scored(await answers(second, QUESTIONS, 'together')), scored(await answers(rebuilt, QUESTIONS, 'together')));
    } finally {
      await store.close();
      await fresh.close();
    }
  });

  it('moves documents from LMDB to Redis and back by export and import with the same retrieval results', async () => {
    // Statistics are corpus-wide, so the source holds nothing else.
    const origin = await engineStore('lmdb');
    const target = await engineStore('redis');
    const back = await engineStore('lmdb');
    try {
      const source = await origin.open();
      await source.addMany(corpus('moved'));
      const onRedis = await target.open();
      for await (const exported of source.exportDocuments()) await onRedis.importDocument(exported);
      const onLmdb = await back.open();
      for await (const exported of onRedis.exportDocuments()) await onLmdb.importDocument(exported);
      const expected = await answers(source, QUESTIONS.slice(0, 15), 'moved');
      assert.deepEqual(await answers(onRedis, QUESTIONS.slice(0, 15), 'moved'), expected);
      assert.deepEqual(await answers(onLmdb, QUESTIONS.slice(0, 15), 'moved'), expected);
      const firstId = (await source.list({ collection: 'moved', limit: 1 }))[0]?.document_id as string;
      assert.deepEqual(await onLmdb.get(firstId), await source.get(firstId));
    } finally {
      await origin.close();
      await target.close();
      await back.close();
    }
  });

  it('fuses BM25 with vector similarity on Redis exactly as on LMDB, and exports the vectors', async () => {
    const embedder: Embedder = {
      model: 'concepts',
      // Unit vectors over a few word groups: enough for similar texts to be near.
      async embed(inputs) {
        return inputs.map((input) => {
          const words = input.toLowerCase().match(/[a-z]+/g) ?? [];
          const counts = CONCEPTS.map((group) => words.filter((word) => group.includes(word)).length + 0.01);
          const norm = Math.hypot(...counts);
          return Float32Array.from(counts, (value) => value / norm);
        });
      },
    };
    const lmdbHybrid = await engineStore('lmdb');
    const redisHybrid = await engineStore('redis');
    try {
      const onLmdb = await lmdbHybrid.open({ embedder, minScore: 0.1 });
      const onRedis = await redisHybrid.open({ embedder, minScore: 0.1 });
      await addEach(onLmdb, corpus('hybrid'));
      await addEach(onRedis, corpus('hybrid'));
      const queries = [...QUESTIONS.slice(0, 10), 'ocean water sea', 'music instrument'];
      const expected = await answers(onLmdb, queries, 'hybrid');
      assert.deepEqual(await answers(onRedis, queries, 'hybrid'), expected);
      assert.equal((await onRedis.stats()).retriever.kind, 'hybrid');
      for await (const exported of onRedis.exportDocuments()) {
        assert.ok(exported.chunks.every((chunk) => chunk.vector?.length === CONCEPTS.length));
        break;
      }
    } finally {
      await lmdbHybrid.close();
      await redisHybrid.close();
    }
  });

  it('answers 503 unavailable while Redis is stopped and works again once it is back', async () => {
    const node = await redis.open();
    await node.add({ title: 'Kea', text: 'The kea is an alpine parrot of New Zealand.', collection: 'outage' });
    await redis.redis?.stop();
    const refusals: Array<Promise<unknown>> = [
      node.retrieve('kea parrot', { topK: 3 }),
      node.add({ title: 'Kakapo', text: 'The kakapo is a flightless parrot.', collection: 'outage' }),
      node.list({ limit: 5 }),
      node.stats(),
      node.hasCollection('outage'),
      node.remove('doc_000000000000000000000000'),
    ];
    for (const refusal of refusals) {
      await assert.rejects(refusal, (error: unknown) => error instanceof ApiError && error.code === 'unavailable');
    }
    await redis.redis?.start();
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      try {
        await node.hasCollection('outage');
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const passages = await node.retrieve('kea parrot', { topK: 3, collection: 'outage' });
    assert.equal(passages[0]?.title, 'Kea');
    await node.add({ title: 'Kakapo', text: 'The kakapo is a flightless parrot.', collection: 'outage' });
    assert.equal((await node.list({ collection: 'outage', limit: 5 })).length, 2);
  });
});
