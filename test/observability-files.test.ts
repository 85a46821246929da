import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bootServer, type TestServer } from './helpers/server.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ALERTS = resolve(ROOT, 'docs/prometheus/alerts.yml');
const DASHBOARD = resolve(ROOT, 'docs/grafana/colloquy.json');

let server: TestServer;
before(async () => {
  server = await bootServer();
});
after(async () => {
  await server.close();
});

/** Metric names a PromQL expression reads (histogram series reduced to their family). */
function metricsIn(expression: string): string[] {
  const names = expression.match(/\bcolloquy_[a-z0-9_]+/g) ?? [];
  return names.map((name) => name.replace(/_(bucket|count|sum)$/, ''));
}

describe('the shipped Prometheus rules and Grafana dashboard', () => {
  test('promtool check rules passes on docs/prometheus/alerts.yml', () => {
    const checked = spawnSync('promtool', ['check', 'rules', ALERTS], { encoding: 'utf8' });
    assert.equal(checked.error, undefined, 'promtool runs (scripts/test-setup.sh installs Debian prometheus)');
    assert.equal(checked.status, 0, `${checked.stdout}${checked.stderr}`);
  });

  test('every metric named in a rule or a dashboard panel is one the server exports', async () => {
    const exposition = await (await server.fetch('/metrics')).text();
    const exported = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]));
    const alerts = readFileSync(ALERTS, 'utf8');
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const expressions = [
      ...[...alerts.matchAll(/expr: \|?\s*([\s\S]*?)(?=\n\s+(?:for|labels|annotations):)/g)].map((match) => match[1] ?? ''),
      ...dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr)),
    ];
    assert.ok(expressions.length >= 10);
    const named = new Set(expressions.flatMap(metricsIn));
    assert.ok(named.size >= 8);
    for (const name of named) assert.ok(exported.has(name), `${name} is not exported`);
  });
});
