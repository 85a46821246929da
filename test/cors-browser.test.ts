/** A page on another origin calls the API from headless Chromium: allowed when listed, refused when not. */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { launchChromium, type TestBrowser } from './helpers/chromium.js';
import { bootServer, type TestServer } from './helpers/server.js';

let page: Server;
let pageOrigin = '';
let listed: TestServer;
let unlisted: TestServer;
let browser: TestBrowser;

before(async () => {
  // The other origin: a plain page on its own port.
  page = createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'),
  );
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  listed = await bootServer({ config: { cors: { origins: [pageOrigin] } } });
  unlisted = await bootServer({ config: { cors: { origins: ['https://someone-else.example'] } } });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await listed?.close();
  await unlisted?.close();
  await new Promise<void>((resolve) => page.close(() => resolve()));
});

/** Runs fetches from the page: a JSON chat and a stream read to the end, with the exposed header. */
async function callFromPage(
  apiUrl: string,
): Promise<{ ok: boolean; status?: number; remaining?: string | null; streamed?: string; failure?: string }> {
  const tab = await browser.context.newPage();
  try {
    await tab.goto(pageOrigin);
    return await tab.evaluate(async (api) => {
      try {
        // application/json (and last-event-id) make these preflighted requests, as a real app's are.
        const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ message: 'hello' }) };
        const json = await fetch(`${api}/api/chat/`, { ...init, headers: { 'content-type': 'application/json', 'last-event-id': '0' } });
        const remaining = json.headers.get('ratelimit-remaining');
        await json.json();
        const stream = await fetch(`${api}/api/chat/stream`, init);
        const streamed = await stream.text();
        return { ok: true, status: json.status, remaining, streamed };
      } catch (error) {
        return { ok: false, failure: String(error) };
      }
    }, apiUrl);
  } finally {
    await tab.close();
  }
}

describe('CORS in a real browser', () => {
  test('a listed origin calls the API, reads the RateLimit headers and a stream', async () => {
    const result = await callFromPage(listed.url);
    assert.equal(result.ok, true, result.failure);
    assert.equal(result.status, 200);
    assert.match(result.remaining ?? '', /^\d+$/);
    assert.match(result.streamed ?? '', /event: done/);
  });

  test('an origin that is not listed is refused by the browser', async () => {
    const result = await callFromPage(unlisted.url);
    assert.equal(result.ok, false);
    assert.match(result.failure ?? '', /TypeError/);
  });
});
