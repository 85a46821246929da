// The caller's usage over the last 30 days (GET /api/usage): requests and errors per day, drawn with uPlot.
import uPlot from './uplot.js';
import { api } from './api.js';
import { $ } from './state.js';

const DAY_S = 86_400;
let plot = null;
let resizer = null;

function chartWidth(target) {
  return Math.max(200, Math.floor(target.getBoundingClientRect().width) || 400);
}

/** Days (epoch seconds) and counts for the last 30 days, days without requests as zero. */
function series(groups, to) {
  const byDay = new Map(groups.map((group) => [group.key, group]));
  const end = Math.floor(Date.parse(to) / 1000 / DAY_S) * DAY_S;
  const days = [];
  const requests = [];
  const errors = [];
  for (let day = end - 29 * DAY_S; day <= end; day += DAY_S) {
    const group = byDay.get(new Date(day * 1000).toISOString().slice(0, 10));
    days.push(day);
    requests.push(group ? group.requests : 0);
    errors.push(group ? group.errors : 0);
  }
  return [days, requests, errors];
}

export async function loadUsage() {
  const usage = await api('GET', '/api/usage?group_by=day');
  const { total } = usage;
  $('usage-total').textContent =
    `${total.requests} requests, ${total.input_tokens + total.output_tokens} tokens (${total.input_tokens} in, ${total.output_tokens} out), ${total.errors} failed`;
  const data = series(usage.groups, usage.to);
  const target = $('usage-chart');
  if (!plot) {
    plot = new uPlot(
      {
        width: chartWidth(target),
        height: 180,
        series: [
          {},
          { label: 'requests', stroke: '#2f6fde', width: 2, points: { show: true } },
          { label: 'failed', stroke: '#c0392b', width: 2, points: { show: true } },
        ],
        axes: [{}, { size: 50 }],
        scales: { x: { time: true }, y: { range: (_plot, _min, max) => [0, Math.max(1, max ?? 1)] } },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      target,
    );
    // The chart follows its card's width (a phone, a resized window).
    resizer = new ResizeObserver(() => plot?.setSize({ width: chartWidth(target), height: 180 }));
    resizer.observe(target);
  } else {
    plot.setData(data);
  }
}
