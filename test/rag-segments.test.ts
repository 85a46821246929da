/**
 * The segmented index on a real LMDB environment: ingestion costs storage writes in proportion to
 * the text, whatever the document's size or the index's; deleting and replacing documents leaves
 * BM25 figures exactly those of an index built from scratch; merges keep the segment count bounded
 * without changing a result; and what a crashed ingestion left behind is swept at the next start.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { DocumentToWrite } from '../src/rag/ingestion.js';
import { planSegment } from '../src/rag/segment-plan.js';
import { KnowledgeBase, type DocumentInput } from '../src/rag/knowledge-base.js';
import { buildPostings } from '../src/rag/postings.js';
import { packOutcome, unpackOutcome, type PreparedContent } from '../src/rag/prepare.js';
import { LmdbStorage } from '../src/store/lmdb.js';

const directories: string[] = [];
after(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

function openIndex(directory?: string): { knowledge: KnowledgeBase; storage: LmdbStorage; directory: string } {
  const dir = directory ?? mkdtempSync(join(tmpdir(), 'colloquy-segments-'));
  if (!directory) directories.push(dir);
  const storage = new LmdbStorage(dir);
  const knowledge = new KnowledgeBase(storage, { chunkSize: 800, chunkOverlap: 100, minScore: 0, threads: 0 });
  return { knowledge, storage, directory: dir };
}

/** Deterministic prose-like text of about `bytes` bytes drawn from a Zipf-shaped vocabulary. */
function text(bytes: number, seed: number): string {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state / 4_294_967_296;
  };
  const words: string[] = [];
  let length = 0;
  while (length < bytes) {
    const word = `w${Math.floor(next() ** 3 * 5000).toString(36)}x`;
    words.push(word);
    length += word.length + 1;
    if (words.length % 14 === 0) words.push('.\n');
    if (words.length % 150 === 0) words.push('\n\n');
  }
  return words.join(' ');
}

async function close(index: { knowledge: KnowledgeBase; storage: LmdbStorage }): Promise<void> {
  await index.knowledge.close();
  await index.storage.close();
}

describe('the segmented knowledge-base index', () => {
  it('writes no more storage keys per byte for a large document than for a small one', async () => {
    const index = openIndex();
    const perKilobyte: number[] = [];
    for (const [position, kilobytes] of [25, 50, 100, 200, 400].entries()) {
      const before = index.knowledge.writeCounters.keys;
      await index.knowledge.add({ title: `doc ${kilobytes}`, text: text(kilobytes * 1024, position + 1) });
      perKilobyte.push((index.knowledge.writeCounters.keys - before) / kilobytes);
    }
    // Flat or falling: a larger document shares more terms between its chunks, so it needs fewer blocks per byte.
    const largest = perKilobyte[perKilobyte.length - 1] as number;
    assert.ok(largest <= (perKilobyte[0] as number) * 1.1, `keys per KB: ${perKilobyte.map((value) => value.toFixed(1)).join(', ')}`);
    assert.ok(perKilobyte.every((value, position) => position === 0 || value <= (perKilobyte[position - 1] as number) * 1.1));
    await close(index);
  });

  it('writes the same keys for a document whatever the size of the index it joins', async () => {
    const index = openIndex();
    const document = text(40 * 1024, 7);
    const costs: number[] = [];
    let filler = 0;
    for (const target of [0, 200, 800, 3200]) {
      while (((await index.knowledge.stats()).chunks ?? 0) < target) {
        const batch: DocumentInput[] = Array.from({ length: 20 }, () => {
          filler += 1;
          return { title: `filler ${filler}`, text: text(4 * 1024, 1000 + filler) };
        });
        await index.knowledge.addMany(batch);
      }
      await index.knowledge.settle();
      const before = index.knowledge.writeCounters.keys;
      await index.knowledge.add({ title: `probe at ${target}`, text: document });
      costs.push(index.knowledge.writeCounters.keys - before);
    }
    const ratio = Math.max(...costs) / Math.min(...costs);
    assert.ok(ratio < 1.2, `keys per probe document: ${costs.join(', ')}`);
    await close(index);
  });

  it('writes a segment of many terms in transactions of bounded size, with a turn of the event loop between them', async () => {
    // Distinct terms, each in one chunk: their blocks are tiny, so only the term count bounds a slice.
    const transactionsFor = async (terms: number) => {
      const index = openIndex();
      const words = Array.from({ length: terms }, (_, number) => `t${number.toString(36)}x`);
      const before = index.knowledge.writeCounters.transactions;
      await index.knowledge.add({ title: 'many terms', text: words.join(' ') });
      const transactions = index.knowledge.writeCounters.transactions - before;
      await close(index);
      return transactions;
    };
    const few = await transactionsFor(2_000);
    const many = await transactionsFor(10_000);
    // 8,000 more terms: four more slices of pages (2,000 terms each) and sixteen more of document
    // frequencies (500 each).
    assert.ok(many - few >= 20, `transactions: ${few} for 2,000 terms, ${many} for 10,000`);
  });

  it('updates document frequencies at most 500 terms per event-loop turn, however slow the commits', async () => {
    const index = openIndex();
    const words = Array.from({ length: 6_000 }, (_, number) => `d${number.toString(36)}x`);
    // The loop's turns, counted by an immediate that renews itself; each document-frequency put is
    // recorded with the turn it ran in. lmdb-js runs every transaction callback queued before a
    // batch in that batch, in one turn: slices queued faster than the disk commits would share one.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const perTurn = new Map<number, number>();
    const prototype = Object.getPrototypeOf(index.storage.root.openDB({ name: 'rag-df' })) as { put: (...args: unknown[]) => unknown };
    const put = prototype.put;
    prototype.put = function (this: { name?: string }, ...args: unknown[]) {
      if (this.name === 'rag-df') perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1);
      return put.apply(this, args);
    };
    try {
      await index.knowledge.add({ title: 'many terms', text: words.join(' ') });
    } finally {
      prototype.put = put;
      ticking = false;
    }
    const counts = [...perTurn.values()];
    assert.equal(
      counts.reduce((sum, count) => sum + count, 0),
      words.length,
    );
    assert.ok(Math.max(...counts) <= 500, `document-frequency puts per turn: ${counts.join(', ')}`);
    await close(index);
  });

  it('keeps BM25 scores and statistics exact through deletes, replacements and merges', async () => {
    const live = openIndex();
    const fresh = openIndex();
    const versions = new Map<string, string>();
    for (let number = 0; number < 40; number += 1) {
      const title = `doc ${number % 24}`;
      const body = text(3 * 1024, 50 + number);
      versions.set(title, body);
      // Separate adds: many small segments, so merges run.
      await live.knowledge.add({ title, text: body, collection: number % 2 === 0 ? 'even' : 'odd' });
    }
    for (const title of ['doc 3', 'doc 8', 'doc 15']) {
      const id = (await live.knowledge.list({ limit: 100 })).find((document) => document.title === title)?.document_id;
      assert.ok(id);
      assert.equal(await live.knowledge.remove(id), true);
      versions.delete(title);
    }
    await live.knowledge.settle();
    // The same final documents, in the same collections, written once into an empty index.
    const collectionOf = new Map((await live.knowledge.list({ limit: 100 })).map((document) => [document.title, document.collection]));
    await fresh.knowledge.addMany(
      [...versions].map(([title, body]) => ({ title, text: body, collection: collectionOf.get(title) as string })),
    );
    await fresh.knowledge.settle();
    const liveStats = await live.knowledge.stats();
    const freshStats = await fresh.knowledge.stats();
    assert.deepEqual([liveStats.documents, liveStats.chunks], [freshStats.documents, freshStats.chunks]);
    assert.deepEqual(await live.knowledge.collections(), await fresh.knowledge.collections());
    for (const query of ['w1x w2x', 'w10x w3x w77x', 'w5x', 'w1ax w4x w1x', 'w2bx']) {
      for (const collection of [undefined, 'even', 'odd']) {
        const options = collection === undefined ? { topK: 8 } : { topK: 8, collection };
        const got = await live.knowledge.retrieve(query, options);
        const want = await fresh.knowledge.retrieve(query, options);
        const where = `${query} in ${collection ?? 'every collection'}`;
        assert.ok(got.length > 0, where);
        assert.deepEqual(
          got.map((passage) => passage.score),
          want.map((passage) => passage.score),
          where,
        );
        // Equal scores are ordered by chunk number, which differs between the two indexes: compare as sets.
        const passages = (list: typeof got) => list.map((passage) => `${passage.score} ${passage.title} ${passage.text}`).sort();
        const last = got.at(-1)?.score;
        const above = (list: typeof got) => passages(list.filter((passage) => passage.score !== last));
        assert.deepEqual(above(got), above(want), where);
      }
    }
    const segments = await live.knowledge.segmentCounts();
    assert.ok(live.knowledge.mergedPostings > 0, 'merges ran');
    assert.ok((segments.live ?? 0) < 16, `segments after merging: ${JSON.stringify(segments)}`);
    assert.equal(segments.retired ?? 0, 0, 'merged-away segments were swept');
    await close(live);
    await close(fresh);
  });

  it('sweeps a segment a crashed ingestion left unpublished at the next start', async () => {
    const first = openIndex();
    await first.knowledge.add({ title: 'kept', text: text(2048, 3) });
    // What a process killed between its segment writes and its publish leaves: a building segment.
    first.storage.root.transactionSync(() => {
      const segments = first.storage.root.openDB({ name: 'rag-segments' });
      const chunks = first.storage.root.openDB({ name: 'rag-chunk-text' });
      const blocks = first.storage.root.openDB({ name: 'rag-blocks', encoding: 'binary' });
      segments.put('zzzzzzzz', {
        state: 'building',
        origin: 'ingest',
        code: '1',
        first_chunk: 900_000,
        span: 1,
        postings: 1,
        pid: 2 ** 22 + 7,
      });
      chunks.put(900_000, { document_id: 'doc_x', ordinal: 0, text: 'orphan', length: 1 });
      blocks.put('zzzzzzzz\u0000orphan', Buffer.alloc(8));
    });
    await close(first);
    const second = openIndex(first.directory);
    await second.knowledge.settle();
    assert.deepEqual(await second.knowledge.segmentCounts(), { live: 1 });
    assert.equal(second.storage.root.openDB({ name: 'rag-chunk-text' }).get(900_000), undefined);
    assert.equal((await second.knowledge.retrieve('orphan', { topK: 3 })).length, 0);
    assert.equal((await second.knowledge.retrieve('w1x', { topK: 3 }))[0]?.title, 'kept');
    await close(second);
  });

  it('moves an index written in the earlier layout (one key per posting) over, keeping ids and text', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'colloquy-segments-'));
    directories.push(directory);
    const storage = new LmdbStorage(directory);
    // What earlier versions stored: documents with chunk keys, chunk records, collection codes, totals.
    storage.root.transactionSync(() => {
      storage.root.openDB({ name: 'rag-documents' }).put('doc_00000000000000000000abcd', {
        id: 'doc_00000000000000000000abcd',
        key: 'Greenhouse',
        title: 'Greenhouse',
        url: undefined,
        collection: 'garden',
        chunks: 2,
        chunk_keys: ['1', '2'],
        chars: 60,
        format: 'text',
        indexed_at: '2026-01-01T00:00:00.000Z',
      });
      const chunks = storage.root.openDB({ name: 'rag-chunks' });
      chunks.put('1', {
        document_id: 'doc_00000000000000000000abcd',
        collection: 'garden',
        ordinal: 0,
        text: 'Tomatoes are watered daily.',
        length: 3,
      });
      chunks.put('2', {
        document_id: 'doc_00000000000000000000abcd',
        collection: 'garden',
        ordinal: 1,
        text: 'Orchids are misted weekly.',
        length: 3,
      });
      storage.root.openDB({ name: 'rag-postings' }).put('tomato\u00001\u00001', [1, 3]);
      storage.root.openDB({ name: 'rag-collections' }).put('garden', { documents: 1, chunks: 2, code: '1' });
      storage.root.openDB({ name: 'rag-meta' }).put('corpus', { documents: 1, chunks: 2, total_length: 6, last_indexed: null });
    });
    const knowledge = new KnowledgeBase(storage, { chunkSize: 800, chunkOverlap: 100, minScore: 0, threads: 0 });
    await knowledge.ready;
    const passages = await knowledge.retrieve('orchids misted', { topK: 2, collection: 'garden' });
    assert.deepEqual(
      passages.map((passage) => [passage.documentId, passage.chunkId, passage.text]),
      [['doc_00000000000000000000abcd', 'doc_00000000000000000000abcd-1', 'Orchids are misted weekly.']],
    );
    assert.deepEqual([(await knowledge.stats()).documents, (await knowledge.stats()).chunks], [1, 2]);
    assert.deepEqual(await knowledge.collections(), [{ name: 'garden', documents: 1, chunks: 2 }]);
    assert.equal(storage.root.openDB({ name: 'rag-postings' }).getCount(), 0, 'the old postings are dropped');
    await knowledge.close();
    await storage.close();
  });
});

describe('segment planning', () => {
  it('numbers terms by their hashes (brought from the worker or computed) and plans as a map would', async () => {
    const words = Array.from({ length: 3000 }, (_, index) => `w${(index * 7919) % 3001}`);
    const documents: DocumentToWrite[] = Array.from({ length: 12 }, (_, position) => {
      const texts = Array.from({ length: 3 }, (_, chunk) =>
        Array.from({ length: 400 }, (_, at) => words[(position * 811 + chunk * 97 + at * at) % words.length]).join(' '),
      );
      const { lengths, postings } = buildPostings(texts, false);
      // Some documents come without hashes (built elsewhere): the planner computes them. Others come
      // as from a worker thread (terms as one string, split only when read).
      if (position % 3 === 1) postings.hashes = undefined;
      const content: PreparedContent = { title: undefined, chars: 0, texts, lengths, pages: undefined, postings };
      const received = position % 3 === 2 ? unpackOutcome(structuredClone(packOutcome({ ok: true, content }))) : undefined;
      return {
        id: String(position),
        key: String(position),
        title: 't',
        url: undefined,
        collection: 'c',
        format: 'text',
        content: received?.ok ? received.content : content,
      };
    });
    const plan = await planSegment(documents, async () => {});
    const expected = new Map<string, number>();
    for (const document of documents) {
      const { terms, offsets } = document.content.postings;
      terms.forEach((term, index) => {
        expected.set(term, (expected.get(term) ?? 0) + (offsets[index + 1] as number) - (offsets[index] as number));
      });
    }
    const sorted = [...expected.keys()].sort();
    assert.deepEqual(plan.terms, sorted);
    assert.deepEqual(
      Array.from(plan.counts),
      sorted.map((term) => expected.get(term)),
    );
  });

  it('yields inside a large document and still chains every term through the documents that hold it, in order', async () => {
    // 9,000 distinct terms in the middle document (as from a worker thread): steps end inside it.
    const vocabulary = (count: number, prefix: string) => Array.from({ length: count }, (_, index) => `${prefix}${index}`).join(' ');
    const contents = [vocabulary(500, 'a'), `${vocabulary(9000, 'b')} ${vocabulary(300, 'a')}`, `${vocabulary(700, 'b')} c0`];
    const documents: DocumentToWrite[] = contents.map((text, position) => {
      const { lengths, postings } = buildPostings([text], false);
      const content: PreparedContent = { title: undefined, chars: 0, texts: [text], lengths, pages: undefined, postings };
      const received = unpackOutcome(structuredClone(packOutcome({ ok: true, content })));
      assert.ok(received.ok);
      const id = String(position);
      return { id, key: id, title: 't', url: undefined, collection: 'c', format: 'text', content: received.content };
    });
    let yields = 0;
    const plan = await planSegment(documents, async () => {
      yields += 1;
    });
    assert.ok(yields >= 3, `planning yielded ${yields} times`);
    assert.equal(plan.terms.length, 9501);
    const held = documents.map((document) => new Set(document.content.postings.terms));
    for (let at = 0; at < plan.terms.length; at += 1) {
      const term = plan.terms[at] as string;
      const holders = held.flatMap((terms, position) => (terms.has(term) ? [position] : []));
      const chained: number[] = [];
      for (let occurrence = plan.heads[at] as number; occurrence !== -1; occurrence = plan.next[occurrence] as number) {
        const position = plan.documentOf[occurrence] as number;
        assert.equal(documents[position]?.content.postings.terms[plan.indexIn[occurrence] as number], term);
        chained.push(position);
      }
      assert.deepEqual(chained, holders, term);
    }
  });
});
