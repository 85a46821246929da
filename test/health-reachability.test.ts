import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bootServer } from './helpers/server.js';
import { startUpstream } from './helpers/upstream-replay.js';
import { until } from './helpers/wait.js';

interface Health {
  status: string;
  checks: { providers: Record<string, { status: string; reason?: string; checked_at?: string }> };
}

describe('/health knows whether each upstream is reachable, from a background probe', () => {
  test('an upstream that answers its model list is ok; once it is gone the node is degraded with the reason, still 200', async () => {
    const listed: string[] = [];
    const upstream = await startUpstream((request, response) => {
      listed.push(request.url ?? '');
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    });
    const server = await bootServer({
      config: {
        models: [{ id: 'gpt-test', provider: 'openai', base_url: `${upstream.url}/v1`, upstream_model: 'gpt-4o-mini' }],
        health_probe_interval_ms: 100,
        upstream: { connect_timeout_ms: 500, first_byte_timeout_ms: 1000, idle_timeout_ms: 1000, retries: 0 },
      },
    });
    try {
      const read = async () => (await (await server.fetch('/health')).json()) as Health;
      assert.ok(
        await until(async () => (await read()).checks.providers['gpt-test']?.checked_at !== undefined, 3000),
        'probed in the background',
      );
      const healthy = await read();
      assert.equal(healthy.status, 'ok');
      assert.equal(healthy.checks.providers['gpt-test']?.status, 'ok');
      assert.ok(listed.includes('/v1/models'), 'the probe reads the model list');
      // Twenty health requests make no upstream call of their own: only the timer's probes, one per
      // 100 ms that passed, reach the upstream.
      const probesBefore = listed.length;
      const askedFrom = performance.now();
      for (let index = 0; index < 20; index += 1) await server.fetch('/health');
      const intervals = Math.floor((performance.now() - askedFrom) / 100);
      assert.ok(listed.length - probesBefore <= intervals + 1, `${listed.length - probesBefore} probes in ${intervals + 1} intervals`);

      await upstream.close();
      assert.ok(await until(async () => (await read()).checks.providers['gpt-test']?.status === 'unreachable', 3000));
      const response = await server.fetch('/health');
      assert.equal(response.status, 200);
      const degraded = (await response.json()) as Health;
      assert.equal(degraded.status, 'degraded');
      assert.ok(degraded.checks.providers['gpt-test']?.reason, 'the reason is given');
      assert.equal(degraded.checks.providers['builtin-extractive']?.status, 'ok');
    } finally {
      await server.close();
    }
  });
});
