/**
 * Start and stop: config → storage → services → http app → listen. Used by the CLI, the tests
 * and the benchmarks alike.
 */
import { createIdentityServices } from './identity.js';
import { loadConfig, type Config } from './config/index.js';
import { trustProxyFrom } from './http/client-address.js';
import { HttpServer } from './http/server.js';
import { createImageProvider } from './images/create.js';
import { createLogger, type Logger } from './logger.js';
import { createMetrics } from './metrics.js';
import { buildRoutes } from './routes/index.js';
import { createKnowledgeBase } from './rag/create.js';
import { createSearchProvider } from './search/factory.js';
import { createProviderRegistry } from './providers/registry.js';
import { ParallelLimiter, StreamSlots } from './quota/parallel.js';
import type { Services } from './services.js';
import { recordUpstreamCalls } from './upstream/observer.js';
import { ReachabilityProbe } from './upstream/reachability.js';
import { UpstreamClient } from './upstream/stream-call.js';
import { openStorage } from './store/open.js';
import { ResumableRuns } from './core/resumable-runs.js';
import { UsageLog } from './quota/usage.js';
import type { QuotaCounterStore } from './store/types.js';
import { isV1Path, openAiErrorBody } from './routes/v1-errors.js';

/** Routes polled by load balancers and Prometheus, logged per request only at debug level. */
const PROBE_ROUTES = new Set(['/health', '/metrics']);

export interface RunningServer {
  port: number;
  url: string;
  services: Services;
  /** Stops accepting, drains in-flight work within the grace period, flushes and closes storage. */
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** "Now" in epoch ms for quota windows and key timestamps (tests move it across a window edge). */
  clock?: () => number;
  /** Wraps the quota counters (tests slow the commit down to see that nothing is sent before it). */
  wrapQuotaCounters?: (counters: QuotaCounterStore) => QuotaCounterStore;
}

/** Builds every service from the config and starts listening. */
export async function startServer(config: Readonly<Config> = loadConfig(), options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = createMetrics();
  // The upstream layer's one metrics and log seam, shared by every kind of upstream call.
  const upstreamCalls = recordUpstreamCalls(metrics, logger);
  const upstream = new UpstreamClient(config.upstream, upstreamCalls);
  const models = createProviderRegistry(config, upstream, options.clock);
  const reachability = new ReachabilityProbe(models.probeTargets(), {
    intervalMs: config.healthProbeIntervalMs,
    timeoutMs: config.upstream.connectTimeoutMs,
    maxBytes: config.upstream.maxFrameBytes,
    observer: upstreamCalls,
  });
  const storage = await openStorage(config, logger);
  const closeStorage = () => storage.close();
  const identity = createIdentityServices(config, storage, options.clock, options.wrapQuotaCounters);
  const knowledge = createKnowledgeBase(config, storage, { logger, metrics });
  let search: Services['search'];
  try {
    search = createSearchProvider(config.search, { metrics, logger, retriever: knowledge });
  } catch (error) {
    // A search provider missing its URL or key stops start-up: close what was opened first.
    await knowledge.close();
    await closeStorage();
    throw error;
  }

  const services: Services = {
    config,
    logger,
    metrics,
    storage,
    ...identity,
    images: createImageProvider(config.images, upstreamCalls),
    search,
    knowledge,
    upstream,
    models,
    reachability,
    parallel: new ParallelLimiter((caller) =>
      caller.kind === 'anonymous'
        ? config.anonymousMaxParallel
        : caller.kind === 'admin'
          ? undefined
          : config.plans[caller.plan]?.max_parallel,
    ),
    streams: new StreamSlots(config.maxStreams),
    resumable: new ResumableRuns(
      identity.streamLog,
      {
        maxBytes: config.resumable.maxBytes,
        ttlMs: config.resumable.ttlSeconds * 1000,
        detachedTimeoutMs: config.resumable.detachedTimeoutSeconds * 1000,
      },
      logger,
      {
        opened: () => metrics.resumableOpen.inc(),
        closed: (outcome, detached) => {
          metrics.resumableOpen.dec();
          if (detached) metrics.detachedGenerations.inc({ outcome });
        },
        logged: (bytes) => metrics.streamLogBytes.inc(bytes),
      },
    ),
    usage: new UsageLog(identity.usageStore, { retentionDays: config.usageRetentionDays, logger, clock: options.clock }),
    lifecycle: { draining: false },
    startedAt: performance.now(),
  };

  const http = new HttpServer({
    routes: buildRoutes(services),
    limits: { maxBytes: config.bodyLimitBytes, maxDepth: config.maxJsonDepth },
    trustProxy: trustProxyFrom(config.trustProxy),
    streamStallTimeoutMs: config.streamStallTimeoutMs,
    drainingRoutes: [...PROBE_ROUTES],
    cors: config.corsOrigins.length > 0 ? { origins: new Set(config.corsOrigins) } : undefined,
    errorBody: (path, error) => (isV1Path(path) ? openAiErrorBody(error) : error.toBody()),
    onRequestDone: (record) => {
      metrics.httpRequests.series(record.method, record.route, record.status).record(record.durationMs / 1000);
      // Probes (/health, /metrics) are polled all day: their lines would drown the real traffic.
      const level = PROBE_ROUTES.has(record.route) && record.status < 500 ? 'debug' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      logger[level](
        {
          request_id: record.id,
          method: record.method,
          route: record.route,
          status: record.status,
          ms: Math.round(record.durationMs * 10) / 10,
          aborted: record.aborted || undefined,
        },
        'request',
      );
    },
    onBackpressure: () => metrics.backpressureWaits.inc(),
    onInternalError: (error, route) => logger.error({ err: error, route }, 'unhandled error'),
  });

  let port: number;
  try {
    port = await http.listen(config.host, config.port);
  } catch (error) {
    await knowledge.close();
    await closeStorage();
    throw error;
  }
  reachability.start();
  services.usage.startSweeping();
  services.resumable.startSweeping();
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  logger.info({ host: config.host, port, version: config.version }, 'listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${host}:${port}`,
    services,
    close: () => {
      closing ??= (async () => {
        services.lifecycle.draining = true;
        await http.close(config.shutdownGraceMs);
        // Generations still running without a client end like any stream: partial answer stored.
        await services.resumable.shutdown();
        await reachability.stop();
        services.usage.stop();
        await upstream.close();
        await knowledge.close();
        await closeStorage();
        logger.info('stopped');
      })();
      return closing;
    },
  };
}
