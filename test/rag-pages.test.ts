/**
 * Posting pages: a segment's blocks packed in term order into pages of a few kilobytes, found by
 * the segment's page directory. Every block comes back exactly, whatever its term or size; an
 * index written before pages (one storage key per term) is still read, and merges move it into
 * pages.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { KnowledgeBase } from '../src/rag/knowledge-base.js';
import { findInPage, PAGE_BYTES, PageDirectory, pageRange, pageRecords, PageWriter } from '../src/rag/pages.js';
import { LmdbStorage } from '../src/store/lmdb.js';

const directories: string[] = [];
after(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

/** A block of `entries` entries whose bytes say which term and entry they belong to. */
function blockFor(seed: number, entries: number): Uint8Array {
  const words = new Uint32Array(entries * 2);
  for (let entry = 0; entry < entries; entry += 1) {
    words[entry * 2] = entry * 3 + seed;
    words[entry * 2 + 1] = (seed * 7 + entry) & 0xffff;
  }
  return new Uint8Array(words.buffer);
}

/** Terms in the order a segment stores them (JavaScript string order), with some that are not ASCII. */
function sortedTerms(count: number): string[] {
  const terms = Array.from({ length: count }, (_, index) => `t${index.toString(36)}`);
  terms.push('café', 'naïve', '東京', 'ζωή', '𝔘nicode', 'ab\u{1f600}');
  return terms.sort();
}

function writePages(terms: readonly string[], sizeOf: (index: number) => number) {
  const pages: Buffer[] = [];
  const writer = new PageWriter('seg', (key, page) => {
    assert.equal(key, `seg\u0001${pages.length.toString(36).padStart(6, '0')}`);
    pages.push(page);
  });
  const blocks = terms.map((term, index) => {
    const block = blockFor(index, sizeOf(index));
    writer.add(term, block);
    return block;
  });
  const directory = new PageDirectory(writer.finish());
  return { pages, blocks, directory };
}

describe('posting pages', () => {
  it('give back every block of a segment by its term, and nothing for a term it does not hold', () => {
    const terms = sortedTerms(3000);
    // Mostly short blocks, some of several pages' size (they get a page of their own).
    const { pages, blocks, directory } = writePages(terms, (index) => (index % 997 === 5 ? 3000 : 1 + (index % 13)));
    assert.ok(pages.length > 10 && pages.length < terms.length / 20, `${pages.length} pages for ${terms.length} terms`);
    for (const page of pages) {
      const records = pageRecords(page);
      assert.ok(page.byteLength <= PAGE_BYTES || records.length === 1, 'a page is over its size only for one large block');
    }
    terms.forEach((term, index) => {
      const page = pages[directory.pageOf(term)] as Buffer;
      const found = findInPage(page, term);
      assert.ok(found, term);
      assert.deepEqual(new Uint8Array(found), blocks[index], term);
    });
    for (const absent of ['a', 't0a', 'tzzzz', 'cafe', '\u{1f600}', 'zz']) {
      const page = directory.pageOf(absent);
      assert.equal(page < 0 ? undefined : findInPage(pages[page] as Buffer, absent), undefined, absent);
    }
  });

  it('read back in order as terms and blocks, aligned for a merge to read them without copying', () => {
    const terms = sortedTerms(500);
    const { pages, blocks } = writePages(terms, (index) => 1 + (index % 40));
    const read = pages.flatMap((page) => pageRecords(page));
    assert.deepEqual(
      read.map((record) => record.term),
      terms,
    );
    read.forEach((record, index) => {
      assert.equal(record.from % 2, 0, 'a block starts on an entry boundary');
      assert.deepEqual(
        new Uint8Array(record.words.buffer, record.words.byteOffset + record.from * 4, (record.to - record.from) * 4),
        blocks[index],
      );
    });
  });
});

describe('an index written before pages', () => {
  const text = (seed: number) =>
    Array.from({ length: 120 }, (_, index) => `w${((seed * 31 + index * index) % 97).toString(36)}x`).join(' ');

  it('is still searched, and merges move it into pages with the same results', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'colloquy-pages-'));
    const freshDir = mkdtempSync(join(tmpdir(), 'colloquy-pages-'));
    directories.push(dir, freshDir);
    const options = { chunkSize: 800, chunkOverlap: 100, minScore: 0, threads: 0 };
    let storage = new LmdbStorage(dir);
    let knowledge = new KnowledgeBase(storage, options);
    for (let seed = 0; seed < 3; seed += 1) await knowledge.add({ title: `old ${seed}`, text: text(seed) });
    await knowledge.settle();
    await knowledge.close();
    // Rewrite every segment as the earlier layout stored it: one key per term, no page directory.
    const blocks = storage.root.openDB<Buffer, string>({ name: 'rag-blocks', encoding: 'binary' });
    const meta = storage.root.openDB<unknown, string>({ name: 'rag-meta' });
    const segments = Array.from(storage.root.openDB({ name: 'rag-segments' }).getKeys()) as string[];
    assert.equal(segments.length, 3);
    storage.root.transactionSync(() => {
      for (const segment of segments) {
        for (const { key, value } of blocks.getRange(pageRange(segment))) {
          for (const record of pageRecords(value)) {
            blocks.put(
              `${segment}\u0000${record.term}`,
              Buffer.from(record.words.buffer, record.words.byteOffset + record.from * 4, (record.to - record.from) * 4),
            );
          }
          blocks.remove(key);
        }
        assert.ok(meta.get(`segment_pages:${segment}`) !== undefined);
        meta.remove(`segment_pages:${segment}`);
      }
    });
    await storage.close();

    storage = new LmdbStorage(dir);
    knowledge = new KnowledgeBase(storage, options);
    const freshStorage = new LmdbStorage(freshDir);
    const fresh = new KnowledgeBase(freshStorage, options);
    for (let seed = 0; seed < 3; seed += 1) await fresh.add({ title: `old ${seed}`, text: text(seed) });
    // Words of each old document, one common to many and some rarer.
    const queries = [0, 1, 2].map((seed) =>
      text(seed)
        .split(' ')
        .filter((_, index) => index % 37 === 0)
        .join(' '),
    );
    const compare = async () => {
      for (const query of queries) {
        const got = await knowledge.retrieve(query, { topK: 5 });
        assert.ok(got.length > 0, query);
        assert.deepEqual(got, await fresh.retrieve(query, { topK: 5 }), query);
      }
    };
    await compare();
    // Enough new segments of the same tier for a merge that takes the old ones in.
    for (let seed = 3; seed < 12; seed += 1) {
      await knowledge.add({ title: `new ${seed}`, text: text(seed) });
      await fresh.add({ title: `new ${seed}`, text: text(seed) });
    }
    await knowledge.settle();
    await fresh.settle();
    assert.ok(knowledge.mergedPostings > 0, 'a merge ran');
    await compare();
    const left = Array.from(storage.root.openDB<Buffer, string>({ name: 'rag-blocks', encoding: 'binary' }).getKeys()).filter(
      (key) => (key as string).split('\u0000')[1] !== undefined,
    );
    assert.deepEqual(left, [], 'no key of the earlier layout is left once its segments were merged');
    await knowledge.close();
    await fresh.close();
    await storage.close();
    await freshStorage.close();
  });
});
