/**
 * A knowledge base on either storage engine for the suites that run the same behaviour on both:
 * LMDB in a scratch directory, or Redis on its own redis-server (redis-server.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KnowledgeBase, type KnowledgeBaseOptions } from '../../src/rag/knowledge-base.js';
import { LmdbStorage } from '../../src/store/lmdb.js';
import { RedisStorage } from '../../src/store/redis.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

export type Engine = 'lmdb' | 'redis';
export const ENGINES: readonly Engine[] = ['lmdb', 'redis'];

/** Where a test's knowledge bases live: one LMDB directory or one Redis server. */
export interface EngineStore {
  engine: Engine;
  /** The Redis server (redis engine only). */
  redis: RedisServer | undefined;
  /** A knowledge base on this store (several may share it: Redis nodes, or LMDB reopened). */
  open(options?: Partial<KnowledgeBaseOptions>): Promise<KnowledgeBase>;
  /** Closes every knowledge base and storage opened here and removes the data. */
  close(): Promise<void>;
}

const DEFAULTS: KnowledgeBaseOptions = { chunkSize: 800, chunkOverlap: 100, minScore: 0, threads: 0 };

export async function engineStore(engine: Engine): Promise<EngineStore> {
  const opened: Array<{ knowledge: KnowledgeBase; storage: LmdbStorage | RedisStorage }> = [];
  const redis = engine === 'redis' ? await startRedisServer() : undefined;
  const dir = engine === 'lmdb' ? mkdtempSync(join(tmpdir(), 'colloquy-kb-')) : undefined;
  let lmdb: LmdbStorage | undefined;
  return {
    engine,
    redis,
    async open(options = {}) {
      let storage: LmdbStorage | RedisStorage;
      if (redis) storage = await RedisStorage.open({ url: redis.url, keyPrefix: 'test:', commandTimeoutMs: 1000, connectTimeoutMs: 1000 });
      else {
        lmdb ??= new LmdbStorage(dir as string);
        storage = lmdb;
      }
      const knowledge = new KnowledgeBase(storage, { ...DEFAULTS, ...options });
      await knowledge.ready;
      opened.push({ knowledge, storage });
      return knowledge;
    },
    async close() {
      for (const { knowledge } of opened) await knowledge.close().catch(() => undefined);
      for (const storage of new Set(opened.map((entry) => entry.storage))) await storage.close();
      await redis?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
