// A small reader of the Prometheus text exposition format (what GET /metrics serves), and the two
// calculations the overview needs from two scrapes: a counter's rate and a histogram's quantile.

/** Reads one `{name="value",…}` label set starting at `start` (just after the `{`); returns [labels, end]. */
function readLabels(line, start) {
  const labels = {};
  let index = start;
  for (;;) {
    while (line[index] === ' ' || line[index] === ',') index += 1;
    if (line[index] === '}') return [labels, index + 1];
    const equals = line.indexOf('=', index);
    if (equals === -1 || line[equals + 1] !== '"') throw new Error('malformed label set');
    const name = line.slice(index, equals).trim();
    let value = '';
    index = equals + 2;
    for (; index < line.length && line[index] !== '"'; index += 1) {
      if (line[index] === '\\') {
        index += 1;
        value += line[index] === 'n' ? '\n' : line[index];
      } else value += line[index];
    }
    if (index >= line.length) throw new Error('unterminated label value');
    labels[name] = value;
    index += 1;
  }
}

/**
 * Parses exposition text into `Map<sample name, Array<{labels, value}>>`. Comment and HELP/TYPE
 * lines are skipped; a malformed line is skipped rather than failing the whole scrape.
 */
export function parsePrometheus(text) {
  const samples = new Map();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    try {
      const brace = line.indexOf('{');
      const space = line.indexOf(' ');
      let name;
      let labels = {};
      let rest;
      if (brace !== -1 && (space === -1 || brace < space)) {
        name = line.slice(0, brace);
        const [parsed, end] = readLabels(line, brace + 1);
        labels = parsed;
        rest = line.slice(end);
      } else {
        name = line.slice(0, space);
        rest = line.slice(space);
      }
      const value = Number(rest.trim().split(/\s+/)[0]);
      if (!name || Number.isNaN(value)) continue;
      if (!samples.has(name)) samples.set(name, []);
      samples.get(name).push({ labels, value });
    } catch {
      // One odd line must not blank the charts.
    }
  }
  return samples;
}

/** Sums the samples of `name` whose labels pass `keep`. */
export function sumOf(samples, name, keep = () => true) {
  let total = 0;
  for (const sample of samples.get(name) ?? []) if (keep(sample.labels)) total += sample.value;
  return total;
}

/** Sums the samples of `name` by the value of one label: `Map<label value, sum>`. */
export function sumBy(samples, name, label) {
  const sums = new Map();
  for (const sample of samples.get(name) ?? []) {
    const key = sample.labels[label] ?? '';
    sums.set(key, (sums.get(key) ?? 0) + sample.value);
  }
  return sums;
}

/** A histogram's cumulative bucket counts summed over the series `keep` passes: `Map<le, count>`. */
export function bucketsOf(samples, name, keep = () => true) {
  const buckets = new Map();
  for (const sample of samples.get(`${name}_bucket`) ?? []) {
    if (!keep(sample.labels)) continue;
    const le = sample.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(sample.labels.le);
    buckets.set(le, (buckets.get(le) ?? 0) + sample.value);
  }
  return buckets;
}

/** The increase of a counter between two scrapes (a restart in between counts from zero). */
export function increase(before, after) {
  return after >= before ? after - before : after;
}

/**
 * The q-quantile of the observations made between two scrapes of a histogram, interpolated
 * linearly within the bucket as Prometheus' histogram_quantile does; null when nothing was observed.
 */
export function quantileBetween(before, after, q) {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => increase(before.get(le) ?? 0, after.get(le) ?? 0));
  const total = counts.at(-1) ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let index = 0; index < bounds.length; index += 1) {
    if (counts[index] < rank) continue;
    const upper = bounds[index];
    const lower = index === 0 ? 0 : bounds[index - 1];
    // Past the last finite bound the best answer is that bound.
    if (upper === Number.POSITIVE_INFINITY) return lower;
    const below = index === 0 ? 0 : counts[index - 1];
    const inBucket = counts[index] - below;
    return inBucket <= 0 ? upper : lower + (upper - lower) * ((rank - below) / inBucket);
  }
  return bounds.length > 1 ? bounds.at(-2) : null;
}
