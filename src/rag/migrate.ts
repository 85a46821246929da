/**
 * Moves a knowledge base written by earlier versions (one LMDB key per posting, string chunk keys)
 * into the segmented layout: every stored chunk is re-indexed as it is (same text, same cut, same
 * document ids), then the old sub-databases are dropped. Runs once, when the index is first opened
 * by this version.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Logger } from '../logger.js';
import type { DocumentFormat } from './extract.js';
import type { RagDatabases } from './index-store.js';
import type { DocumentToWrite, IndexWriter } from './ingestion.js';
import { buildPostings } from './postings.js';
import type { ChunkOptions } from './prepare.js';

interface LegacyDocument {
  id: string;
  key: string;
  title: string;
  url: string | undefined;
  collection: string;
  chunk_keys: string[];
  chars: number;
  format: DocumentFormat;
}

interface LegacyChunk {
  text: string;
}

const LEGACY_DATABASES = ['rag-documents', 'rag-chunks', 'rag-postings', 'rag-terms', 'rag-vectors'];
const BATCH = 64;

/** Re-indexes the documents of the earlier layout, if any, and drops its sub-databases. */
export async function migrateLegacyIndex(
  root: RootDatabase,
  databases: RagDatabases,
  writer: IndexWriter,
  options: ChunkOptions,
  logger: Logger | undefined,
): Promise<void> {
  const legacy = root.openDB<LegacyDocument, string>({ name: 'rag-documents' });
  if (legacy.getCount() === 0) return;
  const chunks = root.openDB<LegacyChunk, string>({ name: 'rag-chunks' });
  const vectors = root.openDB<Buffer, string>({ name: 'rag-vectors', encoding: 'binary' });
  const codes = new Map<string, string | undefined>();
  // The earlier layout's totals and collection records are rebuilt by the writes below.
  writer.transaction(() => {
    databases.meta.remove('corpus');
    for (const key of databases.collections.getKeys()) {
      codes.set(key, (databases.collections.get(key) as { code?: string } | undefined)?.code);
      databases.collections.remove(key);
    }
  });
  let migrated = 0;
  let batch: DocumentToWrite[] = [];
  const flush = async () => {
    // One segment per collection, as the writer requires.
    const byCollection = new Map<string, DocumentToWrite[]>();
    for (const document of batch) byCollection.set(document.collection, [...(byCollection.get(document.collection) ?? []), document]);
    for (const documents of byCollection.values()) await writer.write(documents, async () => {});
    migrated += batch.length;
    batch = [];
  };
  for (const { value: document } of legacy.getRange()) {
    const texts = document.chunk_keys.map((key) => chunks.get(key)?.text).filter((text): text is string => text !== undefined);
    if (texts.length === 0) continue;
    const { lengths, postings } = buildPostings(texts, options.stopWords);
    const code = codes.get(document.collection);
    const stored = code === undefined ? [] : document.chunk_keys.map((key) => vectors.get(`${code}\u0000${key}`));
    const hasVectors = stored.length === texts.length && stored.every((vector) => vector !== undefined);
    batch.push({
      id: document.id,
      key: document.key,
      title: document.title,
      url: document.url,
      collection: document.collection,
      format: document.format,
      content: { title: undefined, chars: document.chars, texts, lengths, pages: undefined, postings },
      vectors: hasVectors ? stored.map((vector) => new Float32Array(new Uint8Array(vector as Buffer).buffer)) : undefined,
    });
    if (batch.length >= BATCH) await flush();
  }
  if (batch.length > 0) await flush();
  for (const name of LEGACY_DATABASES) (root.openDB({ name }) as Database).dropSync();
  logger?.info({ documents: migrated }, 'knowledge base moved to the segmented index');
}
