/** Builds the knowledge base from the config, for the server and the CLI alike. */
import type { Config } from '../config/index.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { LmdbStorage } from '../store/lmdb.js';
import type { RedisStorage } from '../store/redis.js';
import { recordUpstreamCalls } from '../upstream/observer.js';
import { OpenAiEmbedder } from './embeddings.js';
import { KnowledgeBase } from './knowledge-base.js';

/** The embeddings client config.rag.embeddings names, or undefined when none is configured. */
export function createEmbedder(config: Readonly<Config>, deps: { logger?: Logger; metrics?: Metrics } = {}): OpenAiEmbedder | undefined {
  const embeddings = config.rag.embeddings;
  return embeddings
    ? new OpenAiEmbedder({
        baseUrl: embeddings.baseUrl,
        model: embeddings.model,
        apiKey: embeddings.apiKey,
        timeoutMs: config.upstream.firstByteTimeoutMs,
        observer: deps.metrics && deps.logger ? recordUpstreamCalls(deps.metrics, deps.logger) : undefined,
      })
    : undefined;
}

/** The knowledge base over `storage` (its engine picks the index: LMDB or Redis), with an embeddings client when config.rag.embeddings is set. */
export function createKnowledgeBase(
  config: Readonly<Config>,
  storage: LmdbStorage | RedisStorage,
  deps: { logger?: Logger; metrics?: Metrics; threads?: number } = {},
): KnowledgeBase {
  const embedder = createEmbedder(config, deps);
  return new KnowledgeBase(storage, {
    chunkSize: config.rag.chunkSize,
    chunkOverlap: config.rag.chunkOverlap,
    minScore: config.rag.minScore,
    maxTextBytes: config.rag.maxExtractedBytes,
    threads: deps.threads ?? config.rag.ingestThreads,
    embedder,
    logger: deps.logger,
    // colloquy_retrieval_duration_seconds is recorded where retrieval happens, for chat and local search alike.
    observeRetrieval: deps.metrics ? (seconds) => deps.metrics?.retrievalDuration.observe(seconds) : undefined,
  });
}
