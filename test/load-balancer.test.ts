/**
 * The example load-balancer configs of docs/deployment.md (deploy/haproxy.cfg, deploy/nginx.conf),
 * rendered with this test's ports and run for real (Debian's haproxy and nginx, installed by
 * scripts/test-setup.sh) in front of three server processes sharing one redis-server: requests
 * reach every node in turn, a chat stream arrives event by event (not buffered), and the nodes
 * see the client's address through X-Forwarded-For with `trust_proxy: true`, never a spoofed one.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { closedPort } from './helpers/ports.js';
import { startRedisServer, type RedisServer } from './helpers/redis-server.js';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const DEPLOY = new URL('../../deploy/', import.meta.url);
/** Gap between the slow upstream's deltas. */
const DELTA_GAP_MS = 150;
const DELTAS = 6;

let redis: RedisServer | undefined;
let upstream: http.Server | undefined;
const nodes: ServerProcess[] = [];

/** The example config with the test's addresses: the front on `front`, the nodes on their ports. */
function render(file: string, front: number): string {
  let text = readFileSync(new URL(file, DEPLOY), 'utf8');
  assert.match(text, /127\.0\.0\.1:8080/);
  text = text.replaceAll('127.0.0.1:8080', `127.0.0.1:${front}`);
  nodes.forEach((node, index) => {
    const example = `127.0.0.1:${8081 + index}`;
    assert.ok(text.includes(example), `${file} names ${example}`);
    text = text.replaceAll(example, `127.0.0.1:${node.port}`);
  });
  return text;
}

interface Proxy {
  port: number;
  stop(): Promise<void>;
}

async function waitForPort(port: number, child: ChildProcess, name: string): Promise<void> {
  for (let waited = 0; waited < 10_000; waited += 50) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    const up = await fetch(`http://127.0.0.1:${port}/api/models`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${name} did not answer on port ${port}`);
}

/** Runs `command` (foreground, scratch directory) on the rendered config; stopped by pid. */
async function startProxy(name: 'haproxy' | 'nginx'): Promise<Proxy> {
  const dir = mkdtempSync(join(tmpdir(), `colloquy-${name}-`));
  // nginx's workers drop root privileges: they must be able to reach the scratch directory.
  chmodSync(dir, 0o755);
  const port = await closedPort();
  const file = join(dir, name === 'haproxy' ? 'haproxy.cfg' : 'nginx.conf');
  writeFileSync(file, render(name === 'haproxy' ? 'haproxy.cfg' : 'nginx.conf', port));
  const args = name === 'haproxy' ? ['-f', file, '-db'] : ['-c', file, '-p', `${dir}/`, '-e', 'stderr', '-g', 'daemon off;'];
  // Debian puts both in /usr/sbin, which is not on every user's PATH.
  const command = existsSync(`/usr/sbin/${name}`) ? `/usr/sbin/${name}` : name;
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  try {
    await waitForPort(port, child, name);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${(error as Error).message}: ${stderr}`);
  }
  return {
    port,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        // SIGQUIT: nginx's graceful stop; SIGTERM for HAProxy.
        child.kill(name === 'nginx' ? 'SIGQUIT' : 'SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A request through the proxy from a given loopback address, as node:http sends it. */
function request(
  port: number,
  options: { method?: string; path: string; body?: string; headers?: Record<string, string>; localAddress?: string },
  onChunk?: (text: string) => void,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: { ...(options.body ? { 'content-type': 'application/json' } : {}), ...options.headers },
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
        agent: false,
      },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (text: string) => {
          body += text;
          onChunk?.(text);
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
        response.on('error', reject);
      },
    );
    outgoing.setTimeout(15_000, () => outgoing.destroy(new Error('no answer within 15 s')));
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

/** How many GET /api/models each node counted (its own /metrics). */
async function modelCalls(node: ServerProcess): Promise<number> {
  const text = await (await node.fetch('/metrics')).text();
  const line = /^colloquy_http_requests_total\{[^}]*route="\/api\/models"[^}]*status="200"[^}]*\} (\S+)$/m.exec(text);
  return Number(line?.[1] ?? 0);
}

before(async () => {
  // An OpenAI-compatible upstream that streams a delta every DELTA_GAP_MS.
  upstream = http.createServer((incoming, response) => {
    incoming.resume();
    if (incoming.method !== 'POST') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end('{"object":"list","data":[]}');
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    let sent = 0;
    const timer = setInterval(() => {
      if (sent === DELTAS) {
        clearInterval(timer);
        response.end(
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`,
        );
        return;
      }
      sent += 1;
      response.write(
        `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content: `word${sent} ` }, finish_reason: null }] })}\n\n`,
      );
    }, DELTA_GAP_MS);
    response.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((resolve) => upstream?.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  redis = await startRedisServer({ appendfsync: 'always' });
  const started = await Promise.all(
    [0, 1, 2].map(() =>
      startServerProcess({
        config: {
          trust_proxy: true,
          models: [{ id: 'slow', provider: 'openai', base_url: `http://127.0.0.1:${upstreamPort}/v1` }],
          plans: { free: { quota: 1000, window_seconds: 3600 } },
        },
        env: { COLLOQUY_REDIS_URL: redis?.url ?? '', COLLOQUY_REDIS_PREFIX: 'lb:' },
      }),
    ),
  );
  nodes.push(...started);
});

after(async () => {
  await Promise.all(nodes.map((node) => node.close()));
  await redis?.close();
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
});

for (const name of ['haproxy', 'nginx'] as const) {
  describe(`the example ${name} config in front of three nodes`, () => {
    let proxy: Proxy;
    before(async () => {
      proxy = await startProxy(name);
    });
    after(async () => {
      await proxy?.stop();
    });

    test('spreads requests over every node in turn', async () => {
      const before = await Promise.all(nodes.map(modelCalls));
      for (let index = 0; index < 9; index += 1) assert.equal((await request(proxy.port, { path: '/api/models' })).status, 200);
      const afterwards = await Promise.all(nodes.map(modelCalls));
      assert.deepEqual(
        afterwards.map((count, index) => count - (before[index] ?? 0)),
        [3, 3, 3],
      );
    });

    test('passes a chat stream through event by event', async () => {
      const arrivals: number[] = [];
      const started = performance.now();
      const reply = await request(
        proxy.port,
        { method: 'POST', path: '/api/chat/stream', body: JSON.stringify({ message: 'Stream to me slowly', model: 'slow' }) },
        (text) => {
          for (const _ of text.matchAll(/^event: delta$/gm)) arrivals.push(performance.now() - started);
        },
      );
      assert.equal(reply.status, 200, reply.body);
      assert.match(String(reply.headers['content-type']), /text\/event-stream/);
      assert.match(reply.body, /event: done/);
      assert.equal(arrivals.length, DELTAS, reply.body);
      // Each delta arrived on its own, about DELTA_GAP_MS after the one before (not all at the end).
      const spread = (arrivals.at(-1) ?? 0) - (arrivals[0] ?? 0);
      assert.ok(spread >= (DELTAS - 1) * DELTA_GAP_MS * 0.6, `deltas arrived within ${Math.round(spread)} ms: buffered`);
      // A stall of a busy host may merge two of them; a buffering proxy would merge them all.
      const merged = arrivals.filter((at, index) => index > 0 && at - (arrivals[index - 1] ?? 0) < DELTA_GAP_MS * 0.3).length;
      assert.ok(merged <= 1, `arrivals ${arrivals.map(Math.round).join(', ')}`);
    });

    test('the nodes see the client address the proxy saw, not one the client wrote', async () => {
      const reply = await request(proxy.port, {
        path: '/api/chat/quota/me',
        localAddress: '127.0.0.2',
        headers: { 'x-forwarded-for': '203.0.113.9' },
      });
      assert.equal(reply.status, 200, reply.body);
      assert.equal((JSON.parse(reply.body) as { user_id: string }).user_id, 'anon:127.0.0.2');
    });
  });
}
