/**
 * Scenario 8: knowledge-base ingestion rate and retrieval cost as the corpus grows to 1k, 10k and
 * 100k chunks (and 1M with --scale).
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

/** Paragraphs per synthetic document (each paragraph becomes one chunk). */
const PARAGRAPHS_PER_DOCUMENT = 20;
/** Documents handed to addMany at once (they coalesce into segments of a few thousand chunks). */
const DOCUMENTS_PER_CALL = 1000;
/** The ingestion rate at each size is measured on this many documents (5,000 chunks, ~3.2 MB) added to the index of that size. */
const PROBE_DOCUMENTS = 250;

/** A probe: PROBE_DOCUMENTS new documents of the synthetic corpus, in one collection. */
function probeBatch(sample: () => number, title: string): DocumentInput[] {
  return Array.from({ length: PROBE_DOCUMENTS }, (_, index) => ({
    title: `${title} ${index}`,
    text: Array.from(
      { length: PARAGRAPHS_PER_DOCUMENT },
      () => `${Array.from(Uint16Array.from({ length: WORDS_PER_CHUNK }, sample), word).join(' ')}.`,
    ).join('\n\n'),
    collection: 'probe',
  }));
}

/** Chunk size above a paragraph's length and below two: one paragraph is one chunk. */
const KNOWLEDGE_OPTIONS = { chunkSize: 1000, chunkOverlap: 0, minScore: 0, threads: Number(process.env.RAG_THREADS ?? 1) };

/** Ingests `batch()` into a knowledge base of its own (the scenario's settings) and removes it. */
async function warmUp(batch: () => DocumentInput[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'colloquy-bench-rag-warm-'));
  const storage = new LmdbStorage(dir);
  const knowledge = new KnowledgeBase(storage, KNOWLEDGE_OPTIONS);
  try {
    await knowledge.addMany(batch());
    await knowledge.settle();
  } finally {
    await knowledge.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export const ragScenario: Scenario = {
  id: 'rag',
  number: 8,
  title: 'RAG ingestion and retrieval at 1k / 10k / 100k chunks (1M with --scale)',
  async run(options: RunOptions): Promise<ScenarioResult> {
    const sizes = options.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000, ...(options.scale ? [1_000_000] : [])];
    const dir = mkdtempSync(join(tmpdir(), 'colloquy-bench-rag-'));
    const storage = new LmdbStorage(dir);
    const knowledge = new KnowledgeBase(storage, KNOWLEDGE_OPTIONS);
    // The same index read without the scan bound: what the bound costs in quality and saves in time.
    const exhaustive = new KnowledgeBase(storage, { ...KNOWLEDGE_OPTIONS, scanLimit: Number.MAX_SAFE_INTEGER, threads: 0 });
    const next = random(42);
    const sample = zipfSampler(next);
    // Vocabulary ranks fit 16 bits: a million paragraphs of word ranks stay at 300 MB.
    const paragraphs: Uint16Array[] = [];
    const rows: Row[] = [];
    let largeDocumentMs = 0;
    let mergeSeconds = 0;
    try {
      // Before anything is timed, the same work as one probe goes into a throwaway knowledge base in
      // its own directory, so the first probe (the 1k step) does not also pay for compiling the
      // main thread's code (planning, segment writes, lmdb-js encoding); the measured index is untouched,
      // and its words come from a sampler of their own, so the measured corpus is the same as without it.
      await warmUp(() => probeBatch(zipfSampler(random(7)), 'warm-up'));
      // The worker threads start (and load their modules) once, before anything is timed.
      await knowledge.add({ title: 'warm-up', text: 'warm up', collection: 'warmup' });
      await knowledge.removeCollection('warmup');
      for (const size of sizes) {
        // Only ingestion is timed, not the making of the synthetic text.
        let ingestMs = 0;
        let bytes = 0;
        while (paragraphs.length < size) {
          const batch: DocumentInput[] = [];
          for (let index = 0; index < DOCUMENTS_PER_CALL && paragraphs.length < size; index += 1) {
            const texts: string[] = [];
            for (let paragraph = 0; paragraph < PARAGRAPHS_PER_DOCUMENT && paragraphs.length < size; paragraph += 1) {
              const words = Uint16Array.from({ length: WORDS_PER_CHUNK }, sample);
              paragraphs.push(words);
              texts.push(`${Array.from(words, word).join(' ')}.`);
            }
            const text = texts.join('\n\n');
            bytes += Buffer.byteLength(text);
            batch.push({ title: `document ${paragraphs.length}`, text, key: String(paragraphs.length), collection: 'bench' });
          }
          const begin = performance.now();
          const outcomes = await knowledge.addMany(batch);
          ingestMs += performance.now() - begin;
          const failed = outcomes.find((outcome) => !outcome.ok);
          if (failed && !failed.ok) throw failed.error;
        }
        const settleStarted = performance.now();
        await knowledge.settle();
        mergeSeconds += (performance.now() - settleStarted) / 1000;
        const ingestSeconds = (ingestMs + performance.now() - settleStarted) / 1000;

        const queryRandom = random(size);
        const timings: number[] = [];
        const exhaustiveTimings: number[] = [];
        const unbounded = size <= 100_000;
        let found = 0;
        let exhaustiveFound = 0;
        for (let query = 0; query < QUERIES; query += 1) {
          const target = Math.floor(queryRandom() * size);
          const words = paragraphs[target]!;
          const picked = [Math.min(...words), ...Array.from({ length: 3 }, () => words[Math.floor(queryRandom() * words.length)]!)];
          const text = picked.map(word).join(' ');
          const source = `${Array.from(words, word).join(' ')}.`;
          const begin = performance.now();
          const passages = await knowledge.retrieve(text, { topK: 3 });
          timings.push(performance.now() - begin);
          if (passages.some((passage) => passage.text === source)) found += 1;
          if (!unbounded) continue;
          const beginExhaustive = performance.now();
          const all = await exhaustive.retrieve(text, { topK: 3 });
          exhaustiveTimings.push(performance.now() - beginExhaustive);
          if (all.some((passage) => passage.text === source)) exhaustiveFound += 1;
        }
        // The rate at this size: a fixed batch of new documents into the index as it now is (after the queries, so they ran on exactly `size` chunks), fed in
        // one call as a directory walk or an upload would (prepared while earlier ones are written).
        const probe = probeBatch(sample, `probe ${size}`);
        const probeBytes = probe.reduce((sum, input) => sum + Buffer.byteLength(input.text as string), 0);
        const probeCpu = process.cpuUsage();
        const probeStarted = performance.now();
        await knowledge.addMany(probe);
        await knowledge.settle();
        const probeSeconds = (performance.now() - probeStarted) / 1000;
        const probeCpuUsed = process.cpuUsage(probeCpu);

        timings.sort((left, right) => left - right);
        exhaustiveTimings.sort((left, right) => left - right);
        const stats = await knowledge.stats();
        rows.push({
          chunks: size,
          'fill s': round(ingestSeconds, 1),
          'fill MB/s': round(bytes / 1024 ** 2 / ingestSeconds, 2),
          'ingest MB/s': round(probeBytes / 1024 ** 2 / probeSeconds, 2),
          'ingest cpu s': round((probeCpuUsed.user + probeCpuUsed.system) / 1e6, 2),
          'index MB': round(stats.index_bytes / 1024 ** 2, 1),
          'bytes/chunk': Math.round(stats.index_bytes / Math.max(1, stats.chunks)),
          segments: (await knowledge.segmentCounts()).live ?? 0,
          'p50 ms': round(percentile(timings, 0.5), 2),
          'p95 ms': round(percentile(timings, 0.95), 2),
          'max ms': round(timings.at(-1)!, 2),
          'hit@3': round(found / QUERIES, 3),
          'unbounded p50 ms': unbounded ? round(percentile(exhaustiveTimings, 0.5), 2) : null,
          'unbounded p95 ms': unbounded ? round(percentile(exhaustiveTimings, 0.95), 2) : null,
          'unbounded hit@3': unbounded ? round(exhaustiveFound / QUERIES, 3) : null,
          'rss MB': Math.round(process.memoryUsage().rss / 1024 ** 2),
        });
      }
      // One 500 KB document into the largest index, through the worker pool, as an upload would go.
      const large = Array.from({ length: 640 }, () => `${Array.from({ length: WORDS_PER_CHUNK }, sample).map(word).join(' ')}.`).join(
        '\n\n',
      );
      const largeText = large.slice(0, 500 * 1024);
      const begin = performance.now();
      await knowledge.add({ title: 'a 500 KB document', text: largeText, collection: 'bench' });
      largeDocumentMs = performance.now() - begin;
    } finally {
      await knowledge.close();
      await exhaustive.close();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
    const first = rows[0]!;
    const last = rows.at(-1)!;
    const growth = round(Number(last['p50 ms']) / Math.max(0.001, Number(first['p50 ms'])), 1);
    const corpusGrowth = Number(last.chunks) / Number(first.chunks);
    const rates = rows.map((row) => Number(row['ingest MB/s']));
    const spread = round(Math.max(...rates) / Math.min(...rates), 2);
    return {
      rows,
      goals: [
        {
          goal: `p95 retrieval at ${last.chunks} chunks ≤ 50 ms`,
          measured: `${last['p95 ms']} ms`,
          met: Number(last['p95 ms']) <= 50,
        },
        {
          goal: 'retrieval cost grows much slower than the corpus',
          measured: `p50 ×${growth} for ×${round(corpusGrowth, 0)} chunks`,
          met: growth < corpusGrowth / 4,
        },
        {
          goal: 'ingestion ≥ 5 MB/s of text at every index size',
          measured: `${Math.min(...rates)}–${Math.max(...rates)} MB/s`,
          met: Math.min(...rates) >= 5,
        },
        {
          goal: 'ingestion rate within 1.5× of itself from the smallest index to the largest',
          measured: `×${spread}`,
          met: spread <= 1.5,
        },
        {
          goal: 'a 500 KB document ingested in ≤ 300 ms',
          measured: `${round(largeDocumentMs, 0)} ms`,
          met: largeDocumentMs <= 300,
        },
      ],
      notes: [
        `synthetic corpus: documents of ${PARAGRAPHS_PER_DOCUMENT} paragraphs, each ${WORDS_PER_CHUNK} Zipf(1.07) words from a ${VOCABULARY}-word vocabulary (one chunk each); ${QUERIES} queries of 4 words per size, top_k 3`,
        `ingest MB/s: ${PROBE_DOCUMENTS} new documents (${PROBE_DOCUMENTS * PARAGRAPHS_PER_DOCUMENT} chunks) added in one call to the index of that size, through the worker pool and the segment writes until background merges settled; fill: building the index up to that size, ${DOCUMENTS_PER_CALL} documents per call (the probes stay in the index: ${PROBE_DOCUMENTS * PARAGRAPHS_PER_DOCUMENT} more chunks per earlier step)`,
        'before anything is timed, one probe-sized batch goes into a throwaway knowledge base in its own directory (warming the main thread’s code; the measured index never holds it); ingest cpu s: CPU time of the whole process (main thread, worker thread, lmdb-js’s write thread) during the probe, less sensitive than MB/s to other load on the machine',
        `background merges took ${round(mergeSeconds, 1)} s of waiting in all (included in the steps)`,
        `posting lists longer than ${SCAN_LIMIT} are not scanned once rarer terms found candidates (point lookups instead)`,
        'in-process: KnowledgeBase on one LMDB environment, no HTTP; unbounded = every posting list scanned (no SCAN_LIMIT), measured up to 100k chunks; hit@3 = the query’s source paragraph in the top 3',
      ],
    };
  },
};
