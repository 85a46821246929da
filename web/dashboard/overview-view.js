// The overview: live charts of this server's own /metrics (request rate, latency, time to first
// token, open streams, quota use per plan), drawn with uPlot and refreshed every few seconds.
// Two scrapes in a row give one point: counters become rates and histogram buckets quantiles.
import uPlot from './uplot.js';
import { $ } from './state.js';
import { bucketsOf, increase, parsePrometheus, quantileBetween, sumBy, sumOf } from './prometheus.js';

const REFRESH_MS = 3000;
/** Ten minutes of points at the refresh rate. */
const KEEP_POINTS = 200;
const CHART_HEIGHT = 200;
const COLOURS = ['#2f5bd3', '#d9534f', '#1e7b45', '#b06ad9', '#e08a00', '#0b8fa3'];

/** API traffic only: the overview's own /metrics polls and page loads would drown it otherwise. */
const isApiRoute = (labels) => typeof labels.route === 'string' && (labels.route.startsWith('/api') || labels.route.startsWith('/v1'));

const history = { time: [], rate: [], p50: [], p99: [], ttft50: [], ttft99: [], streams: [], quota: new Map() };
const charts = new Map();
let previous = null;
let timer = null;
let inFlight = false;
let resizer = null;

/** One scrape reduced to the figures the charts need. */
function summarise(samples, at) {
  return {
    at,
    requests: sumOf(samples, 'colloquy_http_requests_total', isApiRoute),
    latency: bucketsOf(samples, 'colloquy_http_request_duration_seconds', isApiRoute),
    ttft: bucketsOf(samples, 'colloquy_time_to_first_token_seconds'),
    streams: sumOf(samples, 'colloquy_active_streams'),
    quota: sumBy(samples, 'colloquy_quota_units_total', 'plan'),
  };
}

const milliseconds = (seconds) => (seconds === null ? null : Math.round(seconds * 10_000) / 10);

function addPoint(before, after) {
  const seconds = (after.at - before.at) / 1000;
  if (seconds <= 0) return;
  history.time.push(after.at / 1000);
  history.rate.push(Math.round((increase(before.requests, after.requests) / seconds) * 100) / 100);
  history.p50.push(milliseconds(quantileBetween(before.latency, after.latency, 0.5)));
  history.p99.push(milliseconds(quantileBetween(before.latency, after.latency, 0.99)));
  history.ttft50.push(milliseconds(quantileBetween(before.ttft, after.ttft, 0.5)));
  history.ttft99.push(milliseconds(quantileBetween(before.ttft, after.ttft, 0.99)));
  history.streams.push(after.streams);
  for (const plan of after.quota.keys()) {
    // A plan seen for the first time has no earlier points: pad it so every series lines up with time.
    if (!history.quota.has(plan)) history.quota.set(plan, new Array(history.time.length - 1).fill(null));
  }
  for (const [plan, points] of history.quota) {
    const used = increase(before.quota.get(plan) ?? 0, after.quota.get(plan) ?? 0);
    points.push(Math.round((used / seconds) * 60 * 100) / 100);
  }
  if (history.time.length > KEEP_POINTS) {
    for (const key of ['time', 'rate', 'p50', 'p99', 'ttft50', 'ttft99', 'streams']) history[key].shift();
    for (const points of history.quota.values()) points.shift();
  }
}

function chartWidth(target) {
  return Math.max(200, Math.floor(target.getBoundingClientRect().width) || 400);
}

/** Creates (or, when its series changed, re-creates) the chart in `id`, then gives it the data. */
function draw(id, series, data, unit) {
  const target = $(id);
  const names = series.map((line) => line.label).join('\n');
  let entry = charts.get(id);
  if (entry && entry.names !== names) {
    entry.plot.destroy();
    entry = undefined;
  }
  if (!entry) {
    const plot = new uPlot(
      {
        width: chartWidth(target),
        height: CHART_HEIGHT,
        series: [
          {},
          ...series.map((line, index) => ({
            label: line.label,
            stroke: COLOURS[index % COLOURS.length],
            width: 2,
            value: (_plot, value) => (value === null || value === undefined ? '—' : `${value} ${unit}`),
          })),
        ],
        axes: [{}, { size: 60, values: (_plot, ticks) => ticks.map((tick) => `${tick}`) }],
        scales: { x: { time: true }, y: { range: (_plot, min, max) => [0, Math.max(1, max ?? 1, min ?? 0)] } },
        cursor: { drag: { x: false, y: false } },
      },
      [history.time, ...series.map(() => [])],
      target,
    );
    entry = { plot, names };
    charts.set(id, entry);
  }
  entry.plot.setData([history.time, ...data]);
}

const shown = (value, unit) => (value === null || value === undefined ? '—' : `${value} ${unit}`);

function render() {
  const last = history.time.length - 1;
  draw('chart-rate', [{ label: 'requests/s' }], [history.rate], 'req/s');
  draw('chart-latency', [{ label: 'p50' }, { label: 'p99' }], [history.p50, history.p99], 'ms');
  draw('chart-ttft', [{ label: 'p50' }, { label: 'p99' }], [history.ttft50, history.ttft99], 'ms');
  draw('chart-streams', [{ label: 'open streams' }], [history.streams], '');
  const plans = [...history.quota.keys()].sort();
  draw(
    'chart-quota',
    plans.map((plan) => ({ label: plan })),
    plans.map((plan) => history.quota.get(plan)),
    'units/min',
  );
  if (last < 0) return;
  $('chart-rate-latest').textContent = shown(history.rate[last], 'req/s');
  $('chart-latency-p50').textContent = shown(history.p50[last], 'ms');
  $('chart-latency-p99').textContent = shown(history.p99[last], 'ms');
  $('chart-ttft-p50').textContent = shown(history.ttft50[last], 'ms');
  $('chart-ttft-p99').textContent = shown(history.ttft99[last], 'ms');
  $('chart-streams-latest').textContent = String(history.streams[last]);
  $('chart-quota-latest').textContent =
    plans.length === 0 ? 'none yet' : plans.map((plan) => `${plan} ${history.quota.get(plan)[last] ?? 0}`).join(', ');
}

async function scrape() {
  if (inFlight) return;
  inFlight = true;
  try {
    // /metrics needs no credential; never send the signed-in one where it is not needed.
    const response = await fetch('/metrics', { cache: 'no-store', credentials: 'omit' });
    if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
    const sample = summarise(parsePrometheus(await response.text()), Date.now());
    if (previous) addPoint(previous, sample);
    previous = sample;
    render();
    $('overview-updated').textContent = `Updated ${new Date(sample.at).toLocaleTimeString()}.`;
  } catch (error) {
    $('overview-updated').textContent = `Could not read the metrics: ${error instanceof Error ? error.message : error}.`;
  } finally {
    inFlight = false;
  }
}

/** Starts polling (idempotent); the first point appears after the second scrape. */
export function startOverview() {
  if (timer !== null) return;
  $('overview-interval').textContent = String(REFRESH_MS / 1000);
  scrape();
  timer = setInterval(scrape, REFRESH_MS);
  resizer ??= new ResizeObserver(() => {
    for (const [id, entry] of charts) entry.plot.setSize({ width: chartWidth($(id)), height: CHART_HEIGHT });
  });
  for (const id of ['chart-rate', 'chart-latency', 'chart-ttft', 'chart-streams', 'chart-quota']) resizer.observe($(id));
}

/** Stops polling while the overview is hidden; the history is kept for when it comes back. */
export function stopOverview() {
  if (timer === null) return;
  clearInterval(timer);
  timer = null;
  resizer?.disconnect();
  // The next point must not average over the time the page was not looking.
  previous = null;
}
