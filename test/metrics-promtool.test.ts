import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

let server: TestServer;

before(async () => {
  server = await bootServer({ config: { plans: { free: { quota: 10_000, window_seconds: 86_400 } } } });
});

after(async () => {
  await server.close();
});

describe('the Prometheus exposition', () => {
  test('a scrape taken under load passes promtool check metrics with no warning', async () => {
    // Load of every kind while the scrape is taken: chats (JSON and streams), errors, probes.
    const load = Promise.all(
      Array.from({ length: 60 }, (_, index) => {
        if (index % 4 === 0) return server.fetch('/health');
        if (index % 4 === 1) return server.post('/api/chat/stream', { message: `hello ${index}` });
        if (index % 4 === 2) return server.post('/api/chat/', { nope: true });
        return server.post('/api/chat/', { message: `hello ${index}` });
      }).map(async (pending) => (await pending).text()),
    );
    const scrape = await (await server.fetch('/metrics')).text();
    await load;
    const after = await (await server.fetch('/metrics')).text();
    for (const exposition of [scrape, after]) {
      const checked = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
      assert.equal(checked.error, undefined, 'promtool runs (scripts/test-setup.sh installs Debian prometheus)');
      assert.equal(`${checked.stdout}${checked.stderr}`.trim(), '');
      assert.equal(checked.status, 0);
    }
    assert.match(after, /colloquy_http_requests_total\{method="POST",route="\/api\/chat",status="400"\} [1-9]/);
  });
});
