/**
 * Retrieval statistics: query counters kept in memory and added to the persisted ones in the
 * background, and the figures of GET /api/chat/rag/stats built from them and the index.
 */
import type { RootDatabase } from 'lmdb';
import type { IndexFigures } from './backend.js';
import type { RagDatabases } from './index-store.js';
import { round } from './round.js';

/** The body of GET /api/chat/rag/stats. */
export interface RagStats {
  documents: number;
  chunks: number;
  collections: number;
  index_bytes: number;
  queries: number;
  hit_rate: number;
  avg_retrieval_ms: number;
  last_indexed: string | null;
  retriever: { kind: 'bm25' | 'hybrid'; embedding_model?: string };
}

interface CountersRecord {
  queries: number;
  hits: number;
  total_ms: number;
}

const EMPTY_COUNTERS: CountersRecord = { queries: 0, hits: 0, total_ms: 0 };

/** Query, hit and duration counters, persisted in rag-meta under `counters`. */
export class RetrievalCounters {
  /** Counters not yet written to LMDB. */
  private pending: CountersRecord = { ...EMPTY_COUNTERS };
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly root: RootDatabase,
    private readonly databases: RagDatabases,
    /** How long counters may stay in memory before they are written (ms). */
    private readonly flushMs: number,
  ) {}

  /** Counts one retrieval: whether it returned passages and how long it took. */
  record(hit: boolean, elapsedMs: number): void {
    this.pending.queries += 1;
    if (hit) this.pending.hits += 1;
    this.pending.total_ms += elapsedMs;
    if (!this.flushTimer && !this.closed) {
      // Counters are written in the background so a query never waits for a disk sync.
      this.flushTimer = setTimeout(() => this.flush(), this.flushMs);
      this.flushTimer.unref();
    }
  }

  /** Adds the in-memory counters to the stored ones in one transaction (safe across processes). */
  flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const pending = this.pending;
    if (pending.queries === 0 || this.closed) return;
    this.pending = { ...EMPTY_COUNTERS };
    this.root.transactionSync(() => {
      const stored = this.stored();
      this.databases.meta.put('counters', {
        queries: stored.queries + pending.queries,
        hits: stored.hits + pending.hits,
        total_ms: stored.total_ms + pending.total_ms,
      } satisfies CountersRecord);
    });
  }

  /** Writes pending counters and stops counting into storage; call before the storage closes. */
  close(): void {
    this.flush();
    this.closed = true;
  }

  /** Stored plus pending counters: what every process has counted so far plus this one's backlog. */
  totals(): CountersRecord {
    const stored = this.stored();
    return {
      queries: stored.queries + this.pending.queries,
      hits: stored.hits + this.pending.hits,
      total_ms: stored.total_ms + this.pending.total_ms,
    };
  }

  private stored(): CountersRecord {
    return (this.databases.meta.get('counters') as CountersRecord | undefined) ?? EMPTY_COUNTERS;
  }
}

/** The figures of GET /api/chat/rag/stats from an engine's stored figures. */
export function ragStats(figures: IndexFigures, retriever: RagStats['retriever']): RagStats {
  const { queries, hits, total_ms: totalMs } = figures;
  return {
    documents: figures.documents,
    chunks: figures.chunks,
    collections: figures.collections,
    index_bytes: figures.index_bytes,
    queries,
    hit_rate: queries > 0 ? round(hits / queries, 4) : 0,
    avg_retrieval_ms: queries > 0 ? round(totalMs / queries, 3) : 0,
    last_indexed: figures.last_indexed,
    retriever,
  };
}

/** Pages used by the knowledge base's sub-databases, in bytes. */
export function indexBytes(databases: RagDatabases): number {
  let bytes = 0;
  for (const db of Object.values(databases)) {
    const stats = db.getStats() as { pageSize: number; treeBranchPageCount: number; treeLeafPageCount: number; overflowPages: number };
    bytes += (stats.treeBranchPageCount + stats.treeLeafPageCount + stats.overflowPages) * stats.pageSize;
  }
  return bytes;
}
