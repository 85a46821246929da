/** GET /docs in headless Chromium: the reference page renders every operation from /openapi.json, offline, with no CSP violation. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { launchChromium, type TestBrowser } from './helpers/chromium.js';
import { bootServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let browser: TestBrowser;

before(async () => {
  server = await bootServer();
  // No network but this server: a CDN request would fail and show here.
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

describe('the API reference page', () => {
  test('renders every documented operation, loading nothing from another origin and breaking no CSP rule', async () => {
    const tab = await browser.context.newPage();
    const problems: string[] = [];
    const foreign: string[] = [];
    tab.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    tab.on('pageerror', (error) => problems.push(error.message));
    tab.on('request', (request) => {
      if (!request.url().startsWith(server.url) && !request.url().startsWith('data:')) foreign.push(request.url());
    });
    await tab.goto(`${server.url}/docs`);
    await tab.waitForSelector('.opblock', { timeout: 20_000 });
    const document = (await (await server.fetch('/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> };
    const expected = Object.values(document.paths).reduce((sum, methods) => sum + Object.keys(methods).length, 0);
    const shown = await tab.locator('.opblock').count();
    assert.equal(shown, expected);
    const paths = await tab.locator('.opblock-summary-path').allTextContents();
    assert.ok(
      paths.some((path) => path.replace(/\u200b/g, '').includes('/v1/chat/completions')),
      paths.join(', '),
    );
    assert.match((await tab.locator('.info .title').textContent()) ?? '', /Colloquy/);
    assert.deepEqual(foreign, []);
    assert.deepEqual(
      problems.filter((text) => /Content Security Policy|Refused to/.test(text)),
      [],
      problems.join('\n'),
    );
    await tab.close();
  });
});
