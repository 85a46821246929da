/**
 * The labelled counters and histograms the hot path records into (time to first token, upstream
 * duration, quota units, output tokens, model attempts) keep their series themselves and hand them
 * to the registry when it is scraped; what a scrape shows must be exactly what prom-client's own
 * Counter and Histogram show for the same observations.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { LabelledCounter, LabelledHistogram } from '../src/metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];

function pair() {
  const ours = new Registry();
  const theirs = new Registry();
  const counter = new LabelledCounter(ours, { name: 'test_units_total', help: 'Units.', labelNames: ['model', 'outcome'] as const });
  const histogram = new LabelledHistogram(ours, {
    name: 'test_duration_seconds',
    help: 'Duration.',
    labelNames: ['provider'] as const,
    buckets: BUCKETS,
  });
  const reference = {
    counter: new Counter({ name: 'test_units_total', help: 'Units.', labelNames: ['model', 'outcome'] as const, registers: [theirs] }),
    histogram: new Histogram({
      name: 'test_duration_seconds',
      help: 'Duration.',
      labelNames: ['provider'] as const,
      buckets: BUCKETS,
      registers: [theirs],
    }),
  };
  return {
    ours,
    theirs,
    inc(labels: { model: string; outcome: string }, value?: number) {
      counter.inc(labels, value);
      reference.counter.inc(labels, value ?? 1);
    },
    observe(labels: { provider: string }, value: number) {
      histogram.observe(labels, value);
      reference.histogram.observe(labels, value);
    },
  };
}

describe('labelled series', () => {
  test('a scrape shows exactly what prom-client shows for the same observations', async () => {
    const metrics = pair();
    // Values on a bound, between bounds, above the last one; label values that need escaping.
    for (const value of [0.0005, 0.001, 0.05, 0.1, 2, 30]) metrics.observe({ provider: 'openai' }, value);
    metrics.observe({ provider: 'od"d\\one\nline' }, 0.2);
    metrics.inc({ model: 'mock', outcome: 'ok' });
    metrics.inc({ model: 'mock', outcome: 'ok' }, 4);
    metrics.inc({ model: 'mock', outcome: 'failed' });
    metrics.inc({ model: 'other"\\', outcome: 'skipped' }, 2);
    assert.equal(await metrics.ours.metrics(), await metrics.theirs.metrics());
    // The JSON form too (prom-client leaves `exemplar` undefined on a sum or count sample, which JSON drops).
    const json = async (registry: Registry) => JSON.parse(JSON.stringify(await registry.getMetricsAsJSON())) as unknown;
    assert.deepEqual(await json(metrics.ours), await json(metrics.theirs));
  });

  test('counts between scrapes are added once, and a reset starts every series from zero', async () => {
    const metrics = pair();
    metrics.inc({ model: 'mock', outcome: 'ok' }, 3);
    metrics.observe({ provider: 'openai' }, 0.02);
    assert.equal(await metrics.ours.metrics(), await metrics.theirs.metrics());
    metrics.inc({ model: 'mock', outcome: 'ok' }, 2);
    metrics.inc({ model: 'b', outcome: 'ok' });
    metrics.observe({ provider: 'openai' }, 0.5);
    assert.equal(await metrics.ours.metrics(), await metrics.theirs.metrics());
    assert.match(await metrics.ours.metrics(), /test_units_total\{model="mock",outcome="ok"\} 5/);
    metrics.inc({ model: 'mock', outcome: 'ok' });
    metrics.ours.resetMetrics();
    metrics.theirs.resetMetrics();
    assert.equal(await metrics.ours.metrics(), await metrics.theirs.metrics());
    metrics.inc({ model: 'mock', outcome: 'ok' }, 7);
    metrics.observe({ provider: 'openai' }, 0.003);
    assert.equal(await metrics.ours.metrics(), await metrics.theirs.metrics());
    assert.match(await metrics.ours.metrics(), /test_units_total\{model="mock",outcome="ok"\} 7/);
  });
});
