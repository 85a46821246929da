import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bootServer } from './helpers/server.js';
import { startUpstream } from './helpers/upstream-replay.js';

interface Health {
  status: string;
  checks: { providers: Record<string, { status: string; reason?: string; checked_at?: string }> };
}

async function waitFor(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (let waited = 0; waited < ms; waited += 50) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
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
        await waitFor(async () => (await read()).checks.providers['gpt-test']?.checked_at !== undefined, 3000),
        'probed in the background',
      );
      const healthy = await read();
      assert.equal(healthy.status, 'ok');
      assert.equal(healthy.checks.providers['gpt-test']?.status, 'ok');
      assert.ok(listed.includes('/v1/models'), 'the probe reads the model list');
      const probesBefore = listed.length;
      for (let index = 0; index < 5; index += 1) await server.fetch('/health');
      assert.ok(listed.length - probesBefore <= 1, 'no call per health request');

      await upstream.close();
      assert.ok(await waitFor(async () => (await read()).checks.providers['gpt-test']?.status === 'unreachable', 3000));
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
