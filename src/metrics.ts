/**
 * The one prom-client Registry. Metric names are `colloquy_<noun>_<unit>`; labels are route
 * templates, statuses, plans and providers, never user ids, keys or raw paths.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Metric, MetricValueWithName } from 'prom-client';

const MISNAMED_DEFAULT_GAUGES = [
  'colloquy_nodejs_active_handles_total',
  'colloquy_nodejs_active_requests_total',
  'colloquy_nodejs_active_resources_total',
];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const REQUEST_LABELS = ['method', 'route', 'status'] as const;
type RequestLabels = Record<(typeof REQUEST_LABELS)[number], string>;

/** One labelled series of a histogram kept here: a count, a sum and per-bucket counts. */
export class HistogramSeries<Labels extends Readonly<Record<string, string>> = Readonly<Record<string, string>>> {
  count = 0;
  /** The part of `count` already handed to a prom-client counter fed from this series (the request metrics). */
  exported = 0;
  sum = 0;
  /** Observations per bucket, not cumulative; the last slot holds those above the highest bound. */
  readonly perBucket: Float64Array;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.perBucket = new Float64Array(bounds.length + 1);
  }

  /** Records one observation. */
  record(value: number): void {
    this.count += 1;
    this.sum += value;
    const bounds = this.bounds;
    let index = 0;
    // A value on a bound counts in that bound's bucket (`le`), as prom-client counts it.
    while (index < bounds.length && value > bounds[index]!) index += 1;
    this.perBucket[index]! += 1;
  }
}

/** One (method, route, status) series of the request metrics. */
export type RequestSeries = HistogramSeries<Readonly<RequestLabels>>;

/** One exported sample, as prom-client's histogram hands it to the registry (series labels apart from `le`). */
type HistogramSample = MetricValueWithName<string> & { sharedLabels: Readonly<Record<string, string>>; exemplar?: null };

/** What a metric's get() gives the registry (prom-client's typings declare `type` as a numeric enum, the code uses names). */
interface ExportedMetric<Sample> {
  name: string;
  help: string;
  type: 'histogram';
  aggregator: 'sum';
  values: Sample[];
}

/**
 * A histogram exported in prom-client's histogram shape (the registry formats it exactly as it
 * formats a Histogram) but fed by HistogramSeries found by the caller: prom-client's own observe
 * validates and hashes the label set and finds the bucket through string keys on every call, about
 * 1.5 µs a request, which showed in the /health profile.
 */
class SeriesHistogram {
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    private readonly series: readonly HistogramSeries[],
    /** The registry's resetMetrics: the owner zeroes or drops its series. */
    readonly reset: () => void,
  ) {}

  /** Samples with the series labels kept apart (what the registry's text output reads). */
  async getForPromString(): Promise<ExportedMetric<HistogramSample>> {
    const values: HistogramSample[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const series of this.series) {
      let cumulative = 0;
      for (let index = 0; index < this.bounds.length; index += 1) {
        cumulative += series.perBucket[index]!;
        values.push({
          labels: { le: this.bounds[index]! },
          sharedLabels: series.labels,
          value: cumulative,
          metricName: bucketName,
          exemplar: null,
        });
      }
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: bucketName, exemplar: null },
        { labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` },
        { labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** Samples with every label on the sample (the registry's JSON output). */
  async get(): Promise<ExportedMetric<MetricValueWithName<string>>> {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...sample }) => ({ ...sample, labels: { ...labels, ...sharedLabels } })),
    };
  }
}

/** What a counter fed from series reads of each: its labels, what was counted, and how much of it prom-client has. */
interface CountedSeries {
  readonly labels: Readonly<Record<string, string>>;
  count: number;
  exported: number;
}

/**
 * prom-client's counter fed from series counted elsewhere (the request metrics, LabelledCounter):
 * each scrape hands it what was counted since the last one, so the exposition is prom-client's own.
 */
class SeriesCounter<Name extends string> extends Counter<Name> {
  constructor(
    private readonly series: Iterable<CountedSeries>,
    configuration: { name: string; help: string; labelNames: readonly Name[]; registers: Registry[] },
  ) {
    super({
      ...configuration,
      collect() {
        for (const one of series) {
          if (one.count === one.exported) continue;
          this.inc(one.labels as Partial<Record<Name, string>>, one.count - one.exported);
          one.exported = one.count;
        }
      },
    });
  }

  /** The registry's resetMetrics: what was counted before it is not handed over any more. */
  override reset(): void {
    // prom-client's constructor resets too, before this class's fields are set.
    const series = this.series as Iterable<CountedSeries> | undefined;
    if (series) for (const one of series) one.exported = one.count;
    super.reset();
  }
}

/** Series found by their label values in one map lookup (the key: the values in the label names' order). */
class SeriesByLabels<Name extends string, Series> {
  private readonly byKey = new Map<string, Series>();

  constructor(
    private readonly labelNames: readonly Name[],
    private readonly create: (labels: Readonly<Record<string, string>>) => Series,
  ) {}

  get(labels: Readonly<Record<Name, string>>): Series {
    const names = this.labelNames;
    let key = labels[names[0]!];
    for (let index = 1; index < names.length; index += 1) key += `\u0000${labels[names[index]!]}`;
    let series = this.byKey.get(key);
    if (series === undefined) {
      // A copy of the label set: the caller's object may carry more, or change.
      const own: Record<string, string> = {};
      for (const name of names) own[name] = labels[name];
      series = this.create(own);
      this.byKey.set(key, series);
    }
    return series;
  }

  values(): IterableIterator<Series> {
    return this.byKey.values();
  }

  clear(): void {
    this.byKey.clear();
  }
}

/**
 * A labelled histogram on the hot path (time to first token, upstream duration): observe() finds
 * its series by the label values and counts the bucket in place; the registry reads the series
 * when scraped (SeriesHistogram).
 */
export class LabelledHistogram<Name extends string> {
  private readonly all: HistogramSeries[] = [];
  private readonly series: SeriesByLabels<Name, HistogramSeries>;

  constructor(registry: Registry, options: { name: string; help: string; labelNames: readonly Name[]; buckets: readonly number[] }) {
    this.series = new SeriesByLabels(options.labelNames, (labels) => {
      const series = new HistogramSeries(labels, options.buckets);
      this.all.push(series);
      return series;
    });
    const reset = () => {
      this.series.clear();
      this.all.length = 0;
    };
    // The registry takes any object with prom-client's metric methods (name, get, reset).
    registry.registerMetric(new SeriesHistogram(options.name, options.help, options.buckets, this.all, reset) as unknown as Metric);
  }

  observe(labels: Readonly<Record<Name, string>>, value: number): void {
    this.series.get(labels).record(value);
  }
}

/**
 * A labelled counter on the hot path (quota units, output tokens, model attempts): inc() adds to
 * its series found by the label values; prom-client's counter gets the counts when scraped
 * (SeriesCounter), as the request counter does.
 */
export class LabelledCounter<Name extends string> {
  private readonly series: SeriesByLabels<Name, CountedSeries>;

  constructor(registry: Registry, options: { name: string; help: string; labelNames: readonly Name[] }) {
    this.series = new SeriesByLabels(options.labelNames, (labels) => ({ labels, count: 0, exported: 0 }));
    const series = this.series;
    new SeriesCounter({ [Symbol.iterator]: () => series.values() }, { ...options, registers: [registry] });
  }

  inc(labels: Readonly<Record<Name, string>>, value = 1): void {
    this.series.get(labels).count += value;
  }
}

/** The request count and latency series, cached per method, route template and status. */
export class HttpRequestMetrics {
  private readonly byRoute = new Map<string, Map<string, Map<number, RequestSeries>>>();
  private readonly all: RequestSeries[] = [];

  constructor(registry: Registry) {
    const all = this.all;
    // Counted in the request series; each scrape hands over what was counted since the last one.
    new SeriesCounter(all, {
      name: 'colloquy_http_requests_total',
      help: 'HTTP requests by method, route template and status.',
      labelNames: REQUEST_LABELS,
      registers: [registry],
    });
    // The series stay (this class keeps them by route): a reset zeroes them, and the counter, reset
    // beside it, then restarts from zero too.
    const reset = () => {
      for (const series of all) {
        series.count = 0;
        series.exported = 0;
        series.sum = 0;
        series.perBucket.fill(0);
      }
    };
    const duration = new SeriesHistogram(
      'colloquy_http_request_duration_seconds',
      'Time from request to the end of the response, by route template and status.',
      LATENCY_BUCKETS,
      all,
      reset,
    );
    // The registry takes any object with prom-client's metric methods (name, get, reset).
    registry.registerMetric(duration as unknown as Metric);
  }

  /** The series of one method, route template and status (created on first use). */
  series(method: string, route: string, status: number): RequestSeries {
    let byMethod = this.byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.byRoute.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let series = byStatus.get(status);
    if (!series) {
      series = new HistogramSeries({ method, route, status: String(status) }, LATENCY_BUCKETS);
      byStatus.set(status, series);
      this.all.push(series);
    }
    return series;
  }
}

/** Creates the registry and every metric the service reports. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'colloquy_' });
  // prom-client adds three gauges with a `_total` suffix, which Prometheus reserves for counters
  // (promtool refuses them); the same figures stay available by type in the gauges without it.
  for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(name);
  return {
    registry,
    /** Request count and latency (`colloquy_http_requests_total`, `colloquy_http_request_duration_seconds`). */
    httpRequests: new HttpRequestMetrics(registry),
    timeToFirstToken: new LabelledHistogram(registry, {
      name: 'colloquy_time_to_first_token_seconds',
      help: 'Time from accepting a chat request to its first answer or thinking delta, by provider.',
      labelNames: ['provider'] as const,
      buckets: LATENCY_BUCKETS,
    }),
    outputTokens: new LabelledCounter(registry, {
      name: 'colloquy_output_tokens_total',
      help: 'Output tokens generated, by provider.',
      labelNames: ['provider'] as const,
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
    quotaUnits: new LabelledCounter(registry, {
      name: 'colloquy_quota_units_total',
      help: 'Quota units taken by admitted requests, by plan (a refund after an upstream failure is not subtracted).',
      labelNames: ['plan'] as const,
    }),
    quotaRefusals: new Counter({
      name: 'colloquy_quota_refusals_total',
      help: 'Requests refused with 429 because the plan quota was used up, by plan.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    upstreamDuration: new LabelledHistogram(registry, {
      name: 'colloquy_upstream_duration_seconds',
      help: 'Upstream call duration (request to end of stream), by provider and outcome.',
      labelNames: ['provider', 'outcome'] as const,
      buckets: LATENCY_BUCKETS,
    }),
    upstreamErrors: new Counter({
      name: 'colloquy_upstream_errors_total',
      help: 'Upstream failures by provider and error code.',
      labelNames: ['provider', 'code'] as const,
      registers: [registry],
    }),
    modelAttempts: new LabelledCounter(registry, {
      name: 'colloquy_model_attempts_total',
      help: 'Chat attempts by configured model and outcome (ok, failed before answering, skipped while cooling down).',
      labelNames: ['model', 'outcome'] as const,
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
