import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/index.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'colloquy-npm-start-'));

after(() => rmSync(dataDir, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });
}

describe('npm start, the README way', () => {
  test('SIGTERM to the npm process stops the server: the port closes and the data is flushed', { timeout: 60_000 }, async () => {
    const port = await freePort();
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', COLLOQUY_DATA_DIR: dataDir, LOG_LEVEL: 'silent' },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((done) => npm.once('exit', (code) => done(code)));
    const base = `http://127.0.0.1:${port}`;
    let up = false;
    for (let waited = 0; waited < 45_000 && !up; waited += 200) {
      up = await fetch(`${base}/health`).then(
        (response) => response.ok,
        () => false,
      );
      if (!up) await new Promise((done) => setTimeout(done, 200));
    }
    assert.ok(up, 'the server answered /health');
    const chat = await fetch(`${base}/api/chat/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'remember me', session_id: 'npm-start' }),
    });
    assert.equal(chat.status, 200);

    npm.kill('SIGTERM');
    assert.equal(await exited, 0);
    const refused = await fetch(`${base}/health`).then(
      () => false,
      () => true,
    );
    assert.ok(refused, 'nothing listens on the port any more (no orphaned server)');

    // The stored turn survived the stop: the data directory was flushed and closed cleanly.
    const reopened = await startServer(loadConfig({ HOST: '127.0.0.1', PORT: '0', COLLOQUY_DATA_DIR: dataDir }), {
      logger: createLogger('silent'),
    });
    try {
      const session = await reopened.services.sessions.get(`anon:127.0.0.1`, 'npm-start');
      assert.equal(session?.messages[0]?.content, 'remember me');
    } finally {
      await reopened.close();
    }
  });
});
