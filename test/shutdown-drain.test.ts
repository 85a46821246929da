import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../src/config/index.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';

const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-drain-'));
after(() => rmSync(dataDir, { recursive: true, force: true }));

function boot(overrides: Parameters<typeof loadConfig>[1] = {}) {
  return startServer(loadConfig({ HOST: '127.0.0.1', PORT: '0', COLLOQUY_DATA_DIR: dataDir }, overrides), {
    logger: createLogger('silent'),
  });
}

describe('shutdown: drain, tell the streams still open, store what they had, exit clean', () => {
  test('health says draining and new requests get 503 at once; a stream past the grace period gets one error event and its partial turn is stored', async () => {
    const server = await boot({ builtin_delay_ms: 40, shutdown_grace_ms: 400 });
    const response = await fetch(`${server.url}/api/chat/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'tell me something long', session_id: 'drain' }),
    });
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('event: delta')) text += decoder.decode((await reader.read()).value);

    const closing = server.close();
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 503);
    assert.equal(((await health.json()) as { status: string }).status, 'draining');
    assert.ok(health.headers.get('retry-after'));
    const refused = await fetch(`${server.url}/api/chat/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"hi"}',
    });
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'unavailable');
    assert.ok(refused.headers.get('retry-after'));

    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    const events = text
      .split('\n\n')
      .filter((block) => block.startsWith('event: '))
      .map((block) => ({ event: /^event: (.*)$/m.exec(block)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null') }));
    assert.equal(events.at(-1)?.event, 'error', 'the stream ends with one error event, never a silent cut');
    assert.equal(events.at(-1)?.data.error.code, 'unavailable');
    assert.ok(!events.some((event) => event.event === 'done'));
    const sent = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.ok(sent.length > 0);
    await closing;

    const reopened = await boot();
    try {
      const session = await reopened.services.sessions.get('anon:127.0.0.1', 'drain');
      assert.equal(session?.messages.length, 2);
      assert.equal(session?.messages[1]?.incomplete, true);
      assert.ok(sent.startsWith(session?.messages[1]?.content ?? '-'), 'the stored partial answer is what was produced');
    } finally {
      await reopened.close();
    }
  });

  test('a request that finishes within the grace period completes normally', async () => {
    const server = await boot({ builtin_delay_ms: 5, shutdown_grace_ms: 5000 });
    const response = await fetch(`${server.url}/api/chat/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"hello"}',
    });
    // The headers came: the request is in flight when the drain starts.
    assert.equal(response.status, 200);
    const closing = server.close();
    const text = await response.text();
    assert.match(text, /event: done/);
    assert.doesNotMatch(text, /event: error/);
    await closing;
  });

  test('a second signal during the drain does not cut it short: the process still exits 0 after finishing', {
    timeout: 30_000,
  }, async () => {
    const port = await new Promise<number>((done) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as AddressInfo;
        probe.close(() => done(free));
      });
    });
    const config = join(dataDir, 'drain-config.json');
    // The built-in answer takes well under a second at 10 ms a word: far inside the grace period.
    writeFileSync(config, JSON.stringify({ shutdown_grace_ms: 8000, builtin_delay_ms: 10 }));
    const cli = resolve(dirname(fileURLToPath(import.meta.url)), '../src/cli.js');
    const child = spawn(process.execPath, [cli, 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        HOST: '127.0.0.1',
        PORT: String(port),
        COLLOQUY_DATA_DIR: join(dataDir, 'signals'),
        COLLOQUY_CONFIG: config,
        LOG_LEVEL: 'silent',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.once('exit', (code, signal) => done({ code, signal })),
    );
    let up = false;
    for (let waited = 0; waited < 10_000 && !up; waited += 100) {
      up = await fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.ok,
        () => false,
      );
      if (!up) await new Promise((done) => setTimeout(done, 100));
    }
    assert.ok(up);
    const reply = await fetch(`http://127.0.0.1:${port}/api/chat/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"hello"}',
    });
    // The headers came: the request is in flight when the first signal arrives.
    assert.equal(reply.status, 200);
    child.kill('SIGTERM');
    await new Promise((done) => setTimeout(done, 100));
    child.kill('SIGTERM');
    const text = await reply.text();
    assert.match(text, /event: done/, 'the request in flight finished within the grace period');
    assert.doesNotMatch(text, /event: error/);
    assert.deepEqual(await exited, { code: 0, signal: null });
  });
});
