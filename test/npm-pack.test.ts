import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'colloquy-pack-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((done) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });
}

describe('the package installs as a command', () => {
  test('npm pack, installed into an empty directory, gives a working colloquy serve and CLI', { timeout: 180_000 }, async () => {
    // The tests run from dist/, which is what the tarball ships; prepack (clean + build) is skipped here.
    execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', scratch], { cwd: ROOT, stdio: 'ignore' });
    const tarball = readdirSync(scratch).find((name) => name.endsWith('.tgz'));
    assert.ok(tarball, 'npm pack wrote a tarball');
    const app = join(scratch, 'app');
    execFileSync('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'try-colloquy', version: '1.0.0', private: true }));
    execFileSync('npm', ['install', '--silent', '--no-audit', '--no-fund', join(scratch, tarball)], {
      cwd: app,
      stdio: 'ignore',
      timeout: 150_000,
    });

    const bin = join(app, 'node_modules', '.bin', 'colloquy');
    const env = { PATH: process.env.PATH ?? '', COLLOQUY_DATA_DIR: join(app, 'data'), LOG_LEVEL: 'silent', HOST: '127.0.0.1' };
    const added = execFileSync(bin, ['users', 'add', 'packed', '--json'], { env, encoding: 'utf8' });
    assert.equal((JSON.parse(added) as { user_id: string }).user_id, 'packed');

    const port = await freePort();
    const server = spawn(bin, ['serve'], { env: { ...env, PORT: String(port) }, stdio: 'ignore' });
    const exited = new Promise<number | null>((done) => server.once('exit', (code) => done(code)));
    let health = 0;
    for (let waited = 0; waited < 20_000 && health !== 200; waited += 200) {
      health = await fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.status,
        () => 0,
      );
      if (health !== 200) await new Promise((done) => setTimeout(done, 200));
    }
    assert.equal(health, 200);
    const page = await fetch(`http://127.0.0.1:${port}/dashboard`);
    assert.equal(page.status, 200, 'the dashboard ships in the package');
    // The chart library comes from the installed dependency, not from the repository's node_modules.
    const chartLibrary = /\/dashboard\/assets\/[A-Za-z0-9_-]{16}\/uplot\.css/.exec(await page.text());
    assert.ok(chartLibrary, 'the page links the chart library');
    for (const asset of [chartLibrary[0], chartLibrary[0].replace('uplot.css', 'uplot.js')]) {
      const response = await fetch(`http://127.0.0.1:${port}${asset}`);
      assert.equal(response.status, 200, asset);
      assert.ok((await response.arrayBuffer()).byteLength > 1000, `${asset} has content`);
    }
    const chat = await fetch(`http://127.0.0.1:${port}/api/chat/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"message":"hi"}',
    });
    assert.equal(chat.status, 200);
    server.kill('SIGTERM');
    assert.equal(await exited, 0);
  });
});
