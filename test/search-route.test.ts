/**
 * POST /api/chat/search and `web_search` on the chat routes, end to end: the real server with each
 * search provider pointed at a loopback upstream, answered by the offline built-in model with
 * numbered citations. A provider failure is a plain JSON error before any stream starts, and the
 * quota it reserved is given back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { json, searchFixture, startSearchUpstream, type SearchUpstream, type UpstreamAnswer } from './helpers/search-upstream.js';

const KEY = 'tvly-e2e-secret-key-42';
const PLANS = { free: { quota: 20, window_seconds: 3600 } };

interface SseFrame {
  event: string;
  data: any;
}

function parseSse(text: string): SseFrame[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '' && !block.startsWith(':'))
    .map((block) => {
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n');
      return { event, data: JSON.parse(data) };
    });
}

async function remaining(server: TestServer): Promise<number> {
  const response = await server.fetch('/api/chat/quota/me');
  assert.equal(response.status, 200);
  return ((await response.json()) as { remaining: number }).remaining;
}

describe('search route with SearXNG', () => {
  let upstream: SearchUpstream;
  let server: TestServer;
  before(async () => {
    upstream = await startSearchUpstream(() => json(200, searchFixture('searxng-results.json')));
    server = await bootServer({ config: { plans: PLANS, search: { provider: 'searxng', base_url: upstream.url } } });
  });
  after(async () => {
    await server.close();
    await upstream.close();
  });

  test('answers from the search results with numbered web sources and reports the search', async () => {
    const response = await server.post('/api/chat/search', {
      message: 'How many write transactions can LMDB run at a time?',
      max_results: 3,
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as any;

    assert.equal(upstream.requests.length, 1);
    assert.equal(upstream.requests[0]!.query.get('q'), 'How many write transactions can LMDB run at a time?');
    assert.equal(upstream.requests[0]!.query.get('format'), 'json');

    assert.deepEqual(body.search, { provider: 'searxng', query: 'How many write transactions can LMDB run at a time?', result_count: 3 });
    assert.deepEqual(
      body.sources.map((source: any) => [source.index, source.kind, source.url]),
      [
        [1, 'web', 'https://www.symas.com/lmdb?utm_source=searx&utm_medium=web#overview'],
        [2, 'web', 'http://www.lmdb.tech/doc/group__mdb.html'],
        [3, 'web', 'https://en.wikipedia.org/wiki/Lightning_Memory-Mapped_Database'],
      ],
    );
    assert.doesNotMatch(body.sources[0].snippet, /<|&amp;/);
    assert.equal(body.model, 'builtin-extractive');
    assert.match(body.response, /single write transaction active at a time & readers that never block\. \[1\]/);
    for (const field of ['plan', 'remaining', 'reset', 'timestamp']) assert.ok(field in body, field);
  });

  test('the progress route reports a search stage, then the sources, then the result', async () => {
    const response = await server.post('/api/chat/progress', { message: 'lmdb transaction handle', web_search: { max_results: 2 } });
    assert.equal(response.status, 200);
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const stages = lines.filter((line) => line.type === 'progress').map((line) => line.stage);
    assert.ok(stages.indexOf('search') > stages.indexOf('accepted'), stages.join(','));
    assert.ok(stages.indexOf('generating') > stages.indexOf('search'), stages.join(','));
    const sourcesAt = lines.findIndex((line) => line.type === 'sources');
    assert.equal(lines[sourcesAt].sources.length, 2);
    const last = lines.at(-1);
    assert.equal(last.type, 'result');
    assert.equal(last.search.provider, 'searxng');
    assert.match(last.response, /\[\d\]/);
  });
});

describe('search route with Brave', () => {
  let upstream: SearchUpstream;
  let server: TestServer;
  before(async () => {
    upstream = await startSearchUpstream(() => json(200, searchFixture('brave-web-search.json')));
    server = await bootServer({
      config: { plans: PLANS, search: { provider: 'brave', base_url: upstream.url } },
      env: { BRAVE_API_KEY: KEY },
    });
  });
  after(async () => {
    await server.close();
    await upstream.close();
  });

  test('with Accept: text/event-stream it streams, and the sources event comes before the first delta', async () => {
    const response = await server.post(
      '/api/chat/search',
      { message: 'what does backpressure mean in streams' },
      { accept: 'text/event-stream' },
    );
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const text = await response.text();
    assert.ok(!text.includes(KEY), 'the upstream key never reaches the client');
    const frames = parseSse(text);
    const names = frames.map((frame) => frame.event);
    assert.equal(names[0], 'start');
    const sourcesAt = names.indexOf('sources');
    assert.ok(sourcesAt > 0 && sourcesAt < names.indexOf('delta'), names.join(','));
    assert.equal(names.at(-1), 'done');
    const sources = frames[sourcesAt]!.data;
    assert.deepEqual(sources.search, { provider: 'brave', query: 'what does backpressure mean in streams', result_count: 2 });
    assert.deepEqual(
      sources.sources.map((source: any) => source.title),
      ['uWebSockets.js Backpressure example', 'Backpressure in Streams | Node.js Learn'],
    );
    const answer = frames
      .filter((frame) => frame.event === 'delta')
      .map((frame) => frame.data.text)
      .join('');
    assert.match(answer, /\[2\]/);

    const sent = upstream.requests.at(-1)!;
    assert.equal(sent.path, '/res/v1/web/search');
    assert.equal(sent.headers['x-subscription-token'], KEY);
    assert.equal(sent.query.get('count'), '5');
  });
});

describe('search route with Tavily', () => {
  let answer: UpstreamAnswer;
  let upstream: SearchUpstream;
  let server: TestServer;
  before(async () => {
    upstream = await startSearchUpstream(() => answer);
    server = await bootServer({
      config: { plans: PLANS, search: { provider: 'tavily', base_url: upstream.url, api_key_env: 'E2E_TAVILY_KEY', timeout_ms: 300 } },
      env: { E2E_TAVILY_KEY: KEY },
    });
  });
  after(async () => {
    await server.close();
    await upstream.close();
  });

  test('web_search on /api/chat/ runs the same step and cites the web sources', async () => {
    answer = json(200, searchFixture('tavily-search.json'));
    const response = await server.post('/api/chat/', {
      message: 'how does valibot strictObject treat unknown keys',
      web_search: { max_results: 2 },
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as any;
    assert.deepEqual(JSON.parse(upstream.requests.at(-1)!.body), {
      query: 'how does valibot strictObject treat unknown keys',
      max_results: 2,
      search_depth: 'basic',
    });
    assert.equal(upstream.requests.at(-1)!.headers.authorization, `Bearer ${KEY}`);
    assert.deepEqual(
      body.sources.map((source: any) => [source.index, source.kind, source.title]),
      [
        [1, 'web', 'strictObject | Valibot'],
        [2, 'web', 'Objects | Valibot'],
      ],
    );
    assert.match(body.response, /(unknown (entries|keys?)|refuses any key)[^[]*\[1\]/);
  });

  test('a provider 401 is a JSON 502 upstream_error before any stream starts, and the quota is given back', async () => {
    answer = json(401, searchFixture('tavily-error-401.json'));
    const before = await remaining(server);
    for (const accept of ['application/json', 'text/event-stream']) {
      const response = await server.post('/api/chat/search', { message: 'anything at all' }, { accept });
      assert.equal(response.status, 502, accept);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      const body = (await response.json()) as any;
      assert.equal(body.error.code, 'upstream_error');
      assert.match(body.error.message, /\(tavily\) refused the configured credentials \(HTTP 401\)/);
      assert.ok(!JSON.stringify(body).includes(KEY));
    }
    assert.equal(await remaining(server), before);
  });

  test('a stalled provider is a JSON 504 upstream_timeout after search.timeout_ms', async () => {
    answer = { stall: true };
    const started = performance.now();
    const response = await server.post('/api/chat/stream', { message: 'slow search', web_search: true });
    assert.equal(response.status, 504);
    assert.equal(((await response.json()) as any).error.code, 'upstream_timeout');
    assert.ok(performance.now() - started < 2000);
  });

  test('on the progress route a failure is the last line, after the search stage', async () => {
    answer = json(500, searchFixture('tavily-error-500.json'));
    const response = await server.post('/api/chat/progress', { message: 'anything', web_search: true });
    assert.equal(response.status, 200);
    const lines = (await response.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(lines.at(-2), { ...lines.at(-2), type: 'progress', stage: 'search' });
    assert.equal(lines.at(-1).type, 'error');
    assert.equal(lines.at(-1).error.code, 'upstream_error');
    assert.match(lines.at(-1).error.message, /failed \(HTTP 500\)/);
  });

  test('upstream failures are counted by provider and code in /metrics', async () => {
    const text = await (await server.fetch('/metrics')).text();
    assert.match(text, /colloquy_upstream_errors_total\{provider="tavily",code="upstream_error"\} [1-9]/);
    assert.match(text, /colloquy_upstream_errors_total\{provider="tavily",code="upstream_timeout"\} 1/);
  });
});
