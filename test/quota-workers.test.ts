import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { type ReplayUpstream, startUpstream } from './helpers/upstream-replay.js';
import { until } from './helpers/wait.js';

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));
const ADMIN = 'workers-admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

/** Waits until `done()` holds or `ms` passed (the workers' log lines arrive asynchronously). */
interface LogLine {
  msg: string;
  worker?: number;
  pid?: number;
  port?: number;
  route?: string;
  status?: number;
}

describe('WORKERS=2: several processes on one data directory', () => {
  let child: ChildProcess;
  let dir: string;
  let base: string;
  const lines: LogLine[] = [];
  let upstream: ReplayUpstream;

  before(async () => {
    // An OpenAI-compatible upstream whose usage is exactly the request's token estimate (prompt
    // characters / 4 plus max_tokens), so every settle is zero and only the reservations count.
    upstream = await startUpstream((_request, response, recorded) => {
      const prompt = Math.ceil(String(recorded.body.messages.at(-1).content).length / 4);
      const usage = { prompt_tokens: prompt, completion_tokens: recorded.body.max_tokens, total_tokens: prompt + recorded.body.max_tokens };
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.end(
        `data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: {"choices":[],"usage":${JSON.stringify(usage)}}\n\ndata: [DONE]\n\n`,
      );
    });
    dir = mkdtempSync(join(tmpdir(), 'colloquy-workers-'));
    const configPath = join(dir, 'config.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        plans: {
          free: { quota: 100, window_seconds: 86_400 },
          metered: { quota: 10_000, window_seconds: 86_400, tokens: { quota: 5000, window_seconds: 86_400 } },
        },
        models: [{ id: 'metered-model', provider: 'openai', base_url: `${upstream.url}/v1` }],
        default_model: 'builtin-extractive',
        upstream: { retries: 0 },
      }),
    );
    // A minimal environment: no upstream keys from the developer's shell leak into the server.
    child = spawn(process.execPath, [CLI, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOST: '127.0.0.1',
        PORT: '0',
        WORKERS: '2',
        LOG_LEVEL: 'info',
        COLLOQUY_DATA_DIR: join(dir, 'data'),
        COLLOQUY_CONFIG: configPath,
        COLLOQUY_ADMIN_TOKEN: ADMIN,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buffered = '';
    const ready = new Promise<number>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
      child.stdout!.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        for (let newline = buffered.indexOf('\n'); newline !== -1; newline = buffered.indexOf('\n')) {
          const line = JSON.parse(buffered.slice(0, newline)) as LogLine;
          buffered = buffered.slice(newline + 1);
          lines.push(line);
          if (line.msg === 'workers listening') resolve(line.port!);
        }
      });
    });
    base = `http://127.0.0.1:${await ready}`;
  });

  after(async () => {
    if (child.exitCode === null) {
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0, 'the primary and its workers stop cleanly on SIGTERM');
    }
    rmSync(dir, { recursive: true, force: true });
    await upstream.close();
  });

  async function post(path: string, body: unknown, headers: Record<string, string>): Promise<Response> {
    return fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  }

  test('a 160-request burst spread over both workers gets exactly the remaining count through', async () => {
    assert.equal((await post('/api/admin/users', { user_id: 'shared' }, admin)).status, 201);
    const { key } = (await (await post('/api/admin/users/shared/keys', {}, admin)).json()) as { key: string };
    const headers = { authorization: `Bearer ${key}` };
    for (let index = 0; index < 30; index += 1) assert.equal((await post('/api/chat/', { message: 'warm up' }, headers)).status, 200);

    const responses = await Promise.all(Array.from({ length: 160 }, () => post('/api/chat/', { message: 'burst' }, headers)));
    const ok = responses.filter((response) => response.status === 200);
    assert.equal(ok.length, 70);
    assert.equal(responses.filter((response) => response.status === 429).length, 90);
    const remaining = await Promise.all(ok.map(async (response) => ((await response.json()) as { remaining: number }).remaining));
    assert.deepEqual(
      [...remaining].sort((a, b) => a - b),
      Array.from({ length: 70 }, (_, index) => index),
    );

    const status = (await (await fetch(`${base}/api/chat/quota/me`, { headers })).json()) as { used: number };
    assert.equal(status.used, 100);
    // Logs are written asynchronously: wait for the lines of both workers.
    const servedBy = () => new Set(lines.filter((line) => line.msg === 'request' && line.route === '/api/chat').map((line) => line.worker));
    await until(() => servedBy().size === 2, 3000);
    assert.deepEqual([...servedBy()].sort(), [1, 2], 'both workers served chat requests');
  });

  test('a token budget holds across both workers: 160 concurrent requests reserve exactly what fits', async () => {
    assert.equal((await post('/api/admin/users', { user_id: 'metered', plan: 'metered' }, admin)).status, 201);
    const { key } = (await (await post('/api/admin/users/metered/keys', {}, admin)).json()) as { key: string };
    const headers = { authorization: `Bearer ${key}` };
    // Each request reserves ceil(8 / 4) + 98 = 100 tokens of the 5,000: exactly 50 fit.
    const body = { model: 'metered-model', message: 'tokens!!', max_tokens: 98 };
    const responses = await Promise.all(Array.from({ length: 160 }, () => post('/api/chat/', body, headers)));
    assert.equal(responses.filter((response) => response.status === 200).length, 50);
    assert.equal(responses.filter((response) => response.status === 429).length, 110);
    const status = (await (await fetch(`${base}/api/chat/quota/me`, { headers })).json()) as { used: number; tokens: { used: number } };
    assert.equal(status.tokens.used, 5000);
    assert.equal(status.used, 50, 'refused requests take no request unit either');
  });

  test('a key revoked through one worker is refused by every worker at once', async () => {
    assert.equal((await post('/api/admin/users', { user_id: 'revoker' }, admin)).status, 201);
    const created = (await (await post('/api/admin/users/revoker/keys', {}, admin)).json()) as { key: string; key_id: string };
    const headers = { authorization: `Bearer ${created.key}` };
    const before = await Promise.all(Array.from({ length: 20 }, () => fetch(`${base}/api/chat/quota/me`, { headers })));
    assert.ok(before.every((response) => response.status === 200));
    const revoked = await fetch(`${base}/api/keys/${created.key_id}`, { method: 'DELETE', headers });
    assert.equal(revoked.status, 200);
    const start = lines.length;
    const afterRevoke = await Promise.all(Array.from({ length: 40 }, () => fetch(`${base}/api/chat/quota/me`, { headers })));
    assert.deepEqual([...new Set(afterRevoke.map((response) => response.status))], [401]);
    // Logs are written asynchronously: wait for the lines, then check both processes answered 401.
    const refusedBy = () =>
      new Set(
        lines
          .slice(start)
          .filter((line) => line.msg === 'request' && line.status === 401)
          .map((line) => line.worker),
      );
    await until(() => refusedBy().size === 2, 3000);
    assert.deepEqual([...refusedBy()].sort(), [1, 2]);
  });

  test('a resumable stream is resumed by either worker, from the log they share', async () => {
    assert.equal((await post('/api/admin/users', { user_id: 'resumer' }, admin)).status, 201);
    const { key } = (await (await post('/api/admin/users/resumer/keys', {}, admin)).json()) as { key: string };
    const headers = { authorization: `Bearer ${key}` };
    const started = await (await post('/api/chat/stream', { message: 'resume me anywhere', resumable: true }, headers)).text();
    const streamId = /"stream_id":"(st_[0-9a-f]{24})"/.exec(started)?.[1];
    assert.ok(streamId, started);
    const whole = started.split('\n\n').filter((frame) => frame.includes('event: delta')).length;
    const from = lines.length;
    const servedBy = () =>
      new Set(
        lines
          .slice(from)
          .filter((line) => line.msg === 'request' && line.route === '/api/chat/stream/:stream_id')
          .map((line) => line.worker),
      );
    // Many at once go over several connections, and the kernel spreads connections over the
    // workers at random: a few rounds make sure both took some. Logs are written asynchronously,
    // so each round waits a moment for the lines.
    for (let round = 0; round < 5 && servedBy().size < 2; round++) {
      const replays: string[] = await Promise.all(
        Array.from(
          { length: 24 },
          async (): Promise<string> => (await fetch(`${base}/api/chat/stream/${streamId}?after=2`, { headers })).text(),
        ),
      );
      for (const replay of replays) {
        assert.equal(replay.split('\n\n').filter((frame) => frame.includes('event: delta')).length, whole);
        assert.ok(replay.includes('event: done'));
      }
      await until(() => servedBy().size === 2, 1000);
    }
    assert.deepEqual([...servedBy()].sort(), [1, 2], 'both workers replayed the stream');
  });

  test('a worker that dies is replaced and the service keeps answering on the same port', async () => {
    const victim = lines.find((line) => line.msg === 'listening' && line.worker === 1)!;
    assert.ok(victim.pid);
    const start = lines.length;
    process.kill(victim.pid, 'SIGKILL');
    const deadline = Date.now() + 5000;
    while (!lines.slice(start).some((line) => line.msg === 'listening') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const replacement = lines.slice(start).find((line) => line.msg === 'listening');
    assert.ok(replacement, 'a new worker started listening');
    assert.notEqual(replacement.pid, victim.pid);
    assert.ok(lines.slice(start).some((line) => line.msg === 'worker exited; restarting it'));
    const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${base}/api/chat/quota/me`)));
    assert.ok(answers.every((response) => response.status === 200));
  });
});
