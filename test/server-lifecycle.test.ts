import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHttpServer } from './helpers/http-server.js';
import { bootServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

describe('health and metrics', () => {
  let server: TestServer;
  before(async () => {
    server = await bootServer();
  });
  after(() => server.close());

  it('answers /health 200 with status, version, uptime and a real storage check', async () => {
    const response = await server.fetch('/health');
    assert.equal(response.status, 200);
    const body = (await response.json()) as {
      status: string;
      version: string;
      uptime_s: number;
      checks: { storage: { ok: boolean; engine: string }; providers: Record<string, { provider: string; status: string }> };
    };
    assert.equal(body.status, 'ok');
    assert.match(body.version, /^\d+\.\d+\.\d+/);
    assert.equal(typeof body.uptime_s, 'number');
    assert.equal(body.checks.storage.ok, true);
    assert.equal(body.checks.storage.engine, process.env.COLLOQUY_TEST_STORAGE === 'redis' ? 'redis' : 'lmdb');
    assert.equal(body.checks.providers['builtin-extractive']?.provider, 'builtin');
    const checks = body.checks as unknown as { images: { provider: string }; search: { provider: string } };
    assert.equal(checks.images.provider, 'builtin');
    assert.equal(checks.search.provider, 'local');
  });

  it('answers HEAD /health like GET, with its status and headers and no body', async () => {
    const response = await server.fetch('/health', { method: 'HEAD' });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /application\/json/);
    assert.ok(Number(response.headers.get('content-length')) > 0, 'the length of the GET body');
    assert.equal(await response.text(), '');
    const notGet = await server.fetch('/api/chat/', { method: 'HEAD' });
    assert.equal(notGet.status, 405);
    assert.ok(!(notGet.headers.get('allow') ?? '').includes('HEAD'));
  });

  it('answers /health 503 when storage cannot be read', async () => {
    const broken = await bootServer();
    await broken.services.storage.close();
    const response = await broken.fetch('/health');
    assert.equal(response.status, 503);
    const body = (await response.json()) as { status: string; checks: { storage: { ok: boolean } } };
    assert.equal(body.checks.storage.ok, false);
    assert.equal(body.status, 'unavailable');
    assert.equal((await broken.fetch('/health', { method: 'HEAD' })).status, 503);
    await broken.close();
  });

  it('exposes Prometheus metrics labelled by route template, never by raw path', async () => {
    await server.fetch('/api/chat/session/secret-session-id-123');
    await server.fetch('/health');
    const response = await server.fetch('/metrics');
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /text\/plain/);
    const text = await response.text();
    assert.match(text, /colloquy_http_requests_total\{method="GET",route="\/health",status="200"\} \d+/);
    assert.match(text, /route="\/api\/chat\/session\/:id"/);
    assert.doesNotMatch(text, /secret-session-id-123/);
    assert.match(text, /colloquy_http_request_duration_seconds_bucket/);
    assert.match(text, /colloquy_process_resident_memory_bytes/);
  });
});

describe('graceful shutdown', () => {
  it('lets an in-flight request finish, answers new ones 503 with Retry-After, then closes the listener', async () => {
    let release: (() => void) | undefined;
    const { server, port } = await startHttpServer([
      {
        method: 'GET',
        path: '/slow',
        handler: async (context) => {
          await new Promise<void>((resolve) => {
            release = resolve;
          });
          context.json(200, { finished: true });
        },
      },
    ]);
    const inflight = fetch(`http://127.0.0.1:${port}/slow`);
    // The handler has started: the request is in flight when the drain starts.
    await waitFor(() => release !== undefined, 5000);
    const closing = server.close(5000);
    await sleep(50);
    // While draining the listener stays open (a load balancer must see the 503, not a refused
    // connection), and new work is refused with the contract's error.
    const refused = await fetch(`http://127.0.0.1:${port}/slow`);
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'unavailable');
    assert.ok(refused.headers.get('retry-after'));
    release?.();
    const response = await inflight;
    assert.deepEqual(await response.json(), { finished: true });
    await closing;
    await assert.rejects(fetch(`http://127.0.0.1:${port}/slow`), 'the listener is closed once nothing is in flight');
  });

  it('exits 0 on SIGTERM after flushing storage', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-signal-'));
    const child = spawn(process.execPath, [new URL('../src/cli.js', import.meta.url).pathname, 'serve'], {
      env: { PATH: process.env.PATH, PORT: '0', COLLOQUY_DATA_DIR: dataDir, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = output.match(/"port":(\d+)/);
        if (match) resolve(Number(match[1]));
      });
      child.once('exit', () => reject(new Error(`server exited early: ${output}`)));
    });
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    assert.equal(health.status, 200);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(output, /"msg":"stopped"/);
  });
});
