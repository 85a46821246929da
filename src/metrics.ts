/**
 * The one prom-client Registry. Metric names are `colloquy_<noun>_<unit>`; labels are route
 * templates, statuses, plans and providers, never user ids, keys or raw paths.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const MISNAMED_DEFAULT_GAUGES = [
  'colloquy_nodejs_active_handles_total',
  'colloquy_nodejs_active_requests_total',
  'colloquy_nodejs_active_resources_total',
];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Creates the registry and every metric the service reports. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'colloquy_' });
  // prom-client adds three gauges with a `_total` suffix, which Prometheus reserves for counters
  // (promtool refuses them); the same figures stay available by type in the gauges without it.
  for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(name);
  return {
    registry,
    httpRequests: new Counter({
      name: 'colloquy_http_requests_total',
      help: 'HTTP requests by method, route template and status.',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'colloquy_http_request_duration_seconds',
      help: 'Time from request to the end of the response, by route template and status.',
      labelNames: ['method', 'route', 'status'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    timeToFirstToken: new Histogram({
      name: 'colloquy_time_to_first_token_seconds',
      help: 'Time from accepting a chat request to its first answer or thinking delta, by provider.',
      labelNames: ['provider'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    outputTokens: new Counter({
      name: 'colloquy_output_tokens_total',
      help: 'Output tokens generated, by provider.',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    activeStreams: new Gauge({
      name: 'colloquy_active_streams',
      help: 'Streamed responses (SSE and NDJSON) currently open.',
      registers: [registry],
    }),
    backpressureWaits: new Counter({
      name: 'colloquy_backpressure_waits_total',
      help: 'Times a streamed response waited for a slow client to drain.',
      registers: [registry],
    }),
    quotaUnits: new Counter({
      name: 'colloquy_quota_units_total',
      help: 'Quota units taken by admitted requests, by plan (a refund after an upstream failure is not subtracted).',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    quotaRefusals: new Counter({
      name: 'colloquy_quota_refusals_total',
      help: 'Requests refused with 429 because the plan quota was used up, by plan.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'colloquy_upstream_duration_seconds',
      help: 'Upstream call duration (request to end of stream), by provider and outcome.',
      labelNames: ['provider', 'outcome'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: 'colloquy_upstream_errors_total',
      help: 'Upstream failures by provider and error code.',
      labelNames: ['provider', 'code'] as const,
      registers: [registry],
    }),
    modelAttempts: new Counter({
      name: 'colloquy_model_attempts_total',
      help: 'Chat attempts by configured model and outcome (ok, failed before answering, skipped while cooling down).',
      labelNames: ['model', 'outcome'] as const,
      registers: [registry],
    }),
    fallbacks: new Counter({
      name: 'colloquy_fallbacks_total',
      help: 'Replies answered by a fallback model after an earlier model failed or was cooling down, by the model that answered.',
      labelNames: ['model'] as const,
      registers: [registry],
    }),
    resumableOpen: new Gauge({
      name: 'colloquy_resumable_streams',
      help: 'Resumable generations running in this process (followed or detached).',
      registers: [registry],
    }),
    streamResumes: new Counter({
      name: 'colloquy_stream_resumes_total',
      help: 'Resumes of resumable streams (GET /api/chat/stream/{id} and /progress/{id}) that found their stream.',
      registers: [registry],
    }),
    detachedGenerations: new Counter({
      name: 'colloquy_detached_generations_total',
      help: 'Resumable generations that lost every client at some point, by how they ended (completed, expired, cancelled, failed).',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    streamLogBytes: new Counter({
      name: 'colloquy_stream_log_bytes_total',
      help: 'Bytes written to resumable stream logs.',
      registers: [registry],
    }),
    retrievalDuration: new Histogram({
      name: 'colloquy_retrieval_duration_seconds',
      help: 'Knowledge-base retrieval time.',
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    imageDuration: new Histogram({
      name: 'colloquy_image_generation_duration_seconds',
      help: 'Time to produce the images of one request, by image provider and outcome.',
      labelNames: ['provider', 'outcome'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    imagesGenerated: new Counter({
      name: 'colloquy_images_generated_total',
      help: 'Images returned to clients, by image provider.',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
