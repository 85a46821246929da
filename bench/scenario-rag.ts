/**
 * Scenario 8: knowledge-base retrieval cost as the corpus grows to 1k, 10k and 100k chunks.
 *
 * The corpus is synthetic but shaped like text: each ~1000-character chunk draws ~150 words from a
 * 50,000-word vocabulary with a Zipf distribution, so a few words are in most chunks and most words
 * are rare, as in real documents. Each query takes 4 words from one chunk (one frequent, three of
 * any frequency) so it has a known relevant chunk. The index is the real KnowledgeBase on a real
 * LMDB environment in a temporary directory; timings are in-process (no HTTP), one query at a time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KnowledgeBase, type DocumentInput } from '../src/rag/knowledge-base.js';
import { SCAN_LIMIT } from '../src/rag/bm25.js';
import { LmdbStorage } from '../src/store/lmdb.js';
import { round, type Row, type RunOptions, type Scenario, type ScenarioResult } from './harness.js';

const VOCABULARY = 50_000;
const WORDS_PER_CHUNK = 150;
const QUERIES = 300;

/** A small deterministic PRNG (mulberry32), so every run indexes the same corpus. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

/** Word i of the synthetic vocabulary: letters only, so the tokeniser keeps it whole. */
function word(index: number): string {
  let text = '';
  let rest = index + 26;
  while (rest > 0) {
    text = String.fromCharCode(97 + (rest % 26)) + text;
    rest = Math.floor(rest / 26);
  }
  // A fixed suffix keeps words out of the stop-word list and away from the plural fold.
  return `${text}x`;
}

/** Samples vocabulary ranks from a Zipf(1.07) distribution by inverse CDF over precomputed weights. */
function zipfSampler(next: () => number): () => number {
  const cumulative = new Float64Array(VOCABULARY);
  let total = 0;
  for (let rank = 0; rank < VOCABULARY; rank += 1) {
    total += 1 / (rank + 1) ** 1.07;
    cumulative[rank] = total;
  }
  return () => {
    const target = next() * total;
    let low = 0;
    let high = VOCABULARY - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (cumulative[middle]! < target) low = middle + 1;
      else high = middle;
    }
    return low;
  };
}

function percentile(sorted: number[], fraction: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!;
}

export const ragScenario: Scenario = {
  id: 'rag',
  number: 8,
  title: 'RAG retrieval cost at 1k / 10k / 100k chunks',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const sizes = options.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000];
    const dir = mkdtempSync(join(tmpdir(), 'colloquy-bench-rag-'));
    const storage = new LmdbStorage(dir);
    // Chunk size above the synthetic chunk length: one document is exactly one chunk.
    const knowledge = new KnowledgeBase(storage, { chunkSize: 2000, chunkOverlap: 100, minScore: 0 });
    // The same index read without the scan bound: what the bound costs in quality and saves in time.
    const exhaustive = new KnowledgeBase(storage, { chunkSize: 2000, chunkOverlap: 100, minScore: 0, scanLimit: Number.MAX_SAFE_INTEGER });
    const next = random(42);
    const sample = zipfSampler(next);
    const chunkWords: number[][] = [];
    const rows: Row[] = [];
    try {
      for (const size of sizes) {
        const started = performance.now();
        while (chunkWords.length < size) {
          const batch: DocumentInput[] = [];
          for (let index = 0; index < 1000 && chunkWords.length < size; index += 1) {
            const words = Array.from({ length: WORDS_PER_CHUNK }, sample);
            chunkWords.push(words);
            batch.push({
              title: `chunk ${chunkWords.length}`,
              text: words.map(word).join(' '),
              key: String(chunkWords.length),
              collection: 'bench',
            });
          }
          await knowledge.addMany(batch);
        }
        const ingestSeconds = (performance.now() - started) / 1000;

        const queryRandom = random(size);
        const timings: number[] = [];
        const exhaustiveTimings: number[] = [];
        let found = 0;
        let exhaustiveFound = 0;
        for (let query = 0; query < QUERIES; query += 1) {
          const target = Math.floor(queryRandom() * size);
          const words = chunkWords[target]!;
          const picked = [Math.min(...words), ...Array.from({ length: 3 }, () => words[Math.floor(queryRandom() * words.length)]!)];
          const text = picked.map(word).join(' ');
          const begin = performance.now();
          const passages = await knowledge.retrieve(text, { topK: 3 });
          timings.push(performance.now() - begin);
          if (passages.some((passage) => passage.title === `chunk ${target + 1}`)) found += 1;
          const beginExhaustive = performance.now();
          const all = await exhaustive.retrieve(text, { topK: 3 });
          exhaustiveTimings.push(performance.now() - beginExhaustive);
          if (all.some((passage) => passage.title === `chunk ${target + 1}`)) exhaustiveFound += 1;
        }
        timings.sort((left, right) => left - right);
        exhaustiveTimings.sort((left, right) => left - right);
        const stats = knowledge.stats();
        rows.push({
          chunks: size,
          'ingest s (added)': round(ingestSeconds, 1),
          'index MB': round(stats.index_bytes / 1024 ** 2, 1),
          'p50 ms': round(percentile(timings, 0.5), 2),
          'p95 ms': round(percentile(timings, 0.95), 2),
          'max ms': round(timings.at(-1)!, 2),
          'mean ms': round(timings.reduce((sum, value) => sum + value, 0) / timings.length, 2),
          'hit@3': round(found / QUERIES, 3),
          'unbounded p50 ms': round(percentile(exhaustiveTimings, 0.5), 2),
          'unbounded p95 ms': round(percentile(exhaustiveTimings, 0.95), 2),
          'unbounded hit@3': round(exhaustiveFound / QUERIES, 3),
        });
      }
    } finally {
      knowledge.close();
      exhaustive.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
    const first = rows[0]!;
    const last = rows.at(-1)!;
    const growth = round(Number(last['p50 ms']) / Math.max(0.001, Number(first['p50 ms'])), 1);
    const corpusGrowth = Number(last.chunks) / Number(first.chunks);
    return {
      rows,
      goals: [
        {
          goal: `p95 retrieval at ${last.chunks} chunks under 50 ms`,
          measured: `${last['p95 ms']} ms`,
          met: Number(last['p95 ms']) < 50,
        },
        {
          goal: 'retrieval cost grows much slower than the corpus',
          measured: `p50 ×${growth} for ×${corpusGrowth} chunks`,
          met: growth < corpusGrowth / 4,
        },
      ],
      notes: [
        `synthetic corpus: ${WORDS_PER_CHUNK} Zipf(1.07) words per chunk from a ${VOCABULARY}-word vocabulary; ${QUERIES} queries of 4 words per size, top_k 3`,
        `posting lists longer than ${SCAN_LIMIT} are not scanned once rarer terms found candidates (point lookups instead)`,
        'in-process: KnowledgeBase.retrieve on one LMDB environment, no HTTP; ingest s is the time to add that step’s chunks',
        'unbounded: the same queries on the same index with every posting list scanned (no SCAN_LIMIT); hit@3 = the query’s source chunk in the top 3',
      ],
    };
  },
};
