/**
 * Each web search provider against a real loopback server speaking that API's documented JSON
 * shapes: the request it sends (path, query, headers, body), the results it produces, and how
 * every documented failure (401, 422, 429, 432, 500, 403, malformed, stall, reset, redirect)
 * reaches the caller.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { ConfigError, type Config } from '../src/config/index.js';
import { ApiError } from '../src/errors.js';
import { createLogger } from '../src/logger.js';
import { createMetrics } from '../src/metrics.js';
import type { Passage, Retriever } from '../src/rag/types.js';
import { SNIPPET_MAX_CHARS } from '../src/domain/types.js';
import { createSearchProvider } from '../src/search/factory.js';
import type { SearchProvider } from '../src/search/types.js';
import { json, searchFixture, startSearchUpstream, type SearchUpstream, type UpstreamAnswer } from './helpers/search-upstream.js';
import { waitFor } from './helpers/wait.js';

const KEY = 'sk-search-secret-0123456789';
// Web providers never touch the knowledge base.
const emptyRetriever: Retriever = { retrieve: async () => [] };

const upstreams: SearchUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((upstream) => upstream.close()));
});

async function upstream(answer: UpstreamAnswer | (() => UpstreamAnswer)): Promise<SearchUpstream> {
  const started = await startSearchUpstream(typeof answer === 'function' ? answer : () => answer);
  upstreams.push(started);
  return started;
}

function provider(kind: Config['search']['provider'], baseUrl: string | undefined, options: { apiKey?: string; timeoutMs?: number } = {}) {
  const metrics = createMetrics();
  const search = createSearchProvider(
    { provider: kind, baseUrl, apiKey: options.apiKey, timeoutMs: options.timeoutMs ?? 2000 },
    { metrics, logger: createLogger('silent'), retriever: emptyRetriever },
  );
  return { search, metrics };
}

async function failure(search: SearchProvider, query = 'anything'): Promise<ApiError> {
  try {
    await search.search(query, { maxResults: 5 }, new AbortController().signal);
  } catch (error) {
    assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
    assert.ok(!error.message.includes(KEY), 'the API key must never appear in an error');
    return error;
  }
  assert.fail('the search was expected to fail');
}

describe('SearXNG provider', () => {
  test('sends GET /search with q and format=json and returns cleaned, de-duplicated results', async () => {
    const server = await upstream(json(200, searchFixture('searxng-results.json')));
    const { search } = provider('searxng', server.url);
    const results = await search.search('  lmdb\n write   transaction ', { maxResults: 5 }, new AbortController().signal);

    assert.equal(server.requests.length, 1);
    const sent = server.requests[0]!;
    assert.equal(sent.method, 'GET');
    assert.equal(sent.path, '/search');
    assert.equal(sent.query.get('q'), 'lmdb write transaction');
    assert.equal(sent.query.get('format'), 'json');
    assert.equal(sent.headers.authorization, undefined);
    assert.equal(search.name, 'searxng');

    // The fixture's second result is the first under another spelling, the third is javascript:.
    assert.deepEqual(
      results.map((result) => result.url),
      [
        'https://www.symas.com/lmdb?utm_source=searx&utm_medium=web#overview',
        'http://www.lmdb.tech/doc/group__mdb.html',
        'https://en.wikipedia.org/wiki/Lightning_Memory-Mapped_Database',
      ],
    );
    assert.equal(
      results[0]!.snippet,
      'LMDB is a Btree-based database management library with only a single write transaction active at a time & readers that never block.',
    );
    assert.equal(
      results[1]!.snippet,
      'A transaction handle. All database operations require a transaction handle. Transactions may be read-only or read-write.',
    );
    assert.equal(results[2]!.title, 'Lightning Memory-Mapped Database - Wikipedia');
  });

  test('keeps a path prefix of the base URL and stops at maxResults', async () => {
    const server = await upstream(json(200, searchFixture('searxng-results.json')));
    const { search } = provider('searxng', `${server.url}/searx/`);
    const results = await search.search('lmdb', { maxResults: 2 }, new AbortController().signal);
    assert.equal(server.requests[0]!.path, '/searx/search');
    assert.equal(results.length, 2);
  });

  test('a 403 (JSON output disabled) says to enable json in settings.yml', async () => {
    const server = await upstream({
      status: 403,
      body: searchFixture('searxng-403.html'),
      headers: { 'content-type': 'text/html; charset=utf-8' },
    });
    const error = await failure(provider('searxng', server.url).search);
    assert.equal(error.code, 'upstream_error');
    assert.equal(error.status, 502);
    assert.match(error.message, /settings\.yml/);
    assert.match(error.message, /HTTP 403/);
  });

  test('429, 500, a non-JSON 200 and JSON without results each give upstream_error naming the cause', async () => {
    const cases: Array<[UpstreamAnswer, RegExp]> = [
      [{ status: 429, body: 'Too Many Requests' }, /rate limiting this server \(HTTP 429\)/],
      [{ status: 500, body: 'Internal Server Error' }, /failed \(HTTP 500\)/],
      [{ status: 200, body: '{"results": [', headers: { 'content-type': 'application/json' } }, /not valid JSON/],
      [json(200, { query: 'x', answers: [] }), /without a `results` list/],
    ];
    for (const [answer, message] of cases) {
      const server = await upstream(answer);
      const error = await failure(provider('searxng', server.url).search);
      assert.equal(error.code, 'upstream_error');
      assert.match(error.message, message);
    }
  });
});

describe('Brave provider', () => {
  test('sends GET /res/v1/web/search with q, count, X-Subscription-Token and Accept: application/json', async () => {
    const server = await upstream(json(200, searchFixture('brave-web-search.json')));
    const { search } = provider('brave', server.url, { apiKey: KEY });
    const results = await search.search('uwebsockets backpressure', { maxResults: 4 }, new AbortController().signal);

    const sent = server.requests[0]!;
    assert.equal(sent.method, 'GET');
    assert.equal(sent.path, '/res/v1/web/search');
    assert.equal(sent.query.get('q'), 'uwebsockets backpressure');
    assert.equal(sent.query.get('count'), '4');
    assert.equal(sent.headers['x-subscription-token'], KEY);
    assert.equal(sent.headers.accept, 'application/json');

    assert.deepEqual(results, [
      {
        title: 'uWebSockets.js Backpressure example',
        url: 'https://github.com/uNetworking/uWebSockets.js/blob/master/examples/Backpressure.js',
        snippet: 'Shows how to respect backpressure: when write returns false, wait for onWritable before sending more …',
      },
      {
        title: 'Backpressure in Streams | Node.js Learn',
        url: 'https://nodejs.org/en/learn/modules/backpressuring-in-streams',
        snippet:
          'There is a general problem that occurs during data handling called backpressure and describes a buildup of data behind a buffer during data transfer.',
      },
    ]);
  });

  test('an answer without a web section is zero results, not an error', async () => {
    const server = await upstream(json(200, { type: 'search', query: { original: 'zzqx' }, mixed: { type: 'mixed', main: [] } }));
    const results = await provider('brave', server.url, { apiKey: KEY }).search.search(
      'zzqx',
      { maxResults: 3 },
      new AbortController().signal,
    );
    assert.deepEqual(results, []);
  });

  test('422 SUBSCRIPTION_TOKEN_INVALID and 401 are reported as refused credentials', async () => {
    for (const [status, fixture] of [
      [422, 'brave-error-422.json'],
      [401, 'brave-error-401.json'],
    ] as const) {
      const server = await upstream(json(status, searchFixture(fixture)));
      const error = await failure(provider('brave', server.url, { apiKey: KEY }).search);
      assert.equal(error.code, 'upstream_error');
      assert.match(error.message, /refused the configured credentials/);
      assert.match(error.message, new RegExp(`HTTP ${status} SUBSCRIPTION_TOKEN_`));
    }
  });

  test('429 RATE_LIMITED (errors list), 500 and malformed JSON give upstream_error with the upstream code', async () => {
    const cases: Array<[UpstreamAnswer, RegExp]> = [
      [json(429, searchFixture('brave-error-429.json')), /rate limiting this server \(HTTP 429 RATE_LIMITED\)/],
      [json(500, searchFixture('brave-error-500.json')), /failed \(HTTP 500 SERVER_ERROR\)/],
      [{ status: 200, body: '{"web": {"results": [{"title": "cut', headers: { 'content-type': 'application/json' } }, /not valid JSON/],
      [json(200, { web: { type: 'search' } }), /without a `web\.results` list/],
    ];
    for (const [answer, message] of cases) {
      const server = await upstream(answer);
      const error = await failure(provider('brave', server.url, { apiKey: KEY }).search);
      assert.equal(error.code, 'upstream_error');
      assert.match(error.message, message);
    }
  });
});

describe('Tavily provider', () => {
  test('sends POST /search with a bearer key and {query, max_results, search_depth}', async () => {
    const server = await upstream(json(200, searchFixture('tavily-search.json')));
    const { search } = provider('tavily', server.url, { apiKey: KEY });
    const results = await search.search('valibot strictObject unknown keys', { maxResults: 3 }, new AbortController().signal);

    const sent = server.requests[0]!;
    assert.equal(sent.method, 'POST');
    assert.equal(sent.path, '/search');
    assert.equal(sent.headers.authorization, `Bearer ${KEY}`);
    assert.match(String(sent.headers['content-type']), /^application\/json/);
    assert.deepEqual(JSON.parse(sent.body), { query: 'valibot strictObject unknown keys', max_results: 3, search_depth: 'basic' });

    assert.deepEqual(
      results.map((result) => [result.title, result.url]),
      [
        ['strictObject | Valibot', 'https://valibot.dev/api/strictObject/'],
        ['Objects | Valibot', 'https://valibot.dev/guides/objects/'],
      ],
    );
    assert.match(results[0]!.snippet, /^Creates an object schema that throws an issue for unknown entries\./);
  });

  test('401, 429, 432, 500 and malformed JSON each give upstream_error naming the cause', async () => {
    const cases: Array<[UpstreamAnswer, RegExp]> = [
      [json(401, searchFixture('tavily-error-401.json')), /refused the configured credentials \(HTTP 401\)/],
      [json(429, searchFixture('tavily-error-429.json')), /rate limiting this server \(HTTP 429\)/],
      [json(432, searchFixture('tavily-error-432.json')), /usage limit is reached \(HTTP 432\)/],
      [json(500, searchFixture('tavily-error-500.json')), /failed \(HTTP 500\)/],
      [{ status: 200, body: '<html>gateway</html>', headers: { 'content-type': 'text/html' } }, /not valid JSON/],
    ];
    for (const [answer, message] of cases) {
      const server = await upstream(answer);
      const error = await failure(provider('tavily', server.url, { apiKey: KEY }).search);
      assert.equal(error.code, 'upstream_error');
      assert.match(error.message, message);
    }
  });
});

describe('local provider', () => {
  const passage = (documentId: string, chunk: number, text: string, url?: string): Passage => ({
    documentId,
    chunkId: `${documentId}#${chunk}`,
    title: `Document ${documentId}`,
    url,
    text,
    score: 10 - chunk,
  });

  test('returns one result per document with a snippet centred on the matching sentence, reported as local', async () => {
    const asked: Array<{ query: string; topK: number }> = [];
    const filler = 'The archive also keeps letters, maps and photographs from the period. '.repeat(6);
    const retriever: Retriever = {
      retrieve: async (query, options) => {
        asked.push({ query, topK: options.topK });
        return [
          passage(
            'a',
            0,
            `${filler}The lighthouse keeper was Ada Brennan, who lit the lamp for forty years. ${filler}`,
            'https://example.org/a',
          ),
          passage('a', 1, 'A second chunk of the same document.', 'https://example.org/a'),
          passage('b', 0, 'Harbour records list every ship that docked after 1820.'),
        ];
      },
    };
    const search = createSearchProvider(
      { provider: 'local', baseUrl: undefined, apiKey: undefined, timeoutMs: 1000 },
      { metrics: createMetrics(), logger: createLogger('silent'), retriever },
    );
    const results = await search.search('Who was the lighthouse\nkeeper?', { maxResults: 2 }, new AbortController().signal);
    assert.equal(search.name, 'local');
    assert.deepEqual(asked, [{ query: 'Who was the lighthouse keeper?', topK: 6 }]);
    assert.deepEqual(
      results.map((result) => [result.title, result.url]),
      [
        ['Document a', 'https://example.org/a'],
        ['Document b', undefined],
      ],
    );
    assert.ok(results[0]!.snippet.length <= SNIPPET_MAX_CHARS);
    assert.match(results[0]!.snippet, /The lighthouse keeper was Ada Brennan, who lit the lamp for forty years\./);
  });
});

describe('every web provider', () => {
  test('a stalled upstream gives upstream_timeout after search.timeout_ms and its connection is closed', async () => {
    const server = await upstream({ stall: true });
    const { search, metrics } = provider('tavily', server.url, { apiKey: KEY, timeoutMs: 150 });
    const started = performance.now();
    const error = await failure(search);
    const elapsed = performance.now() - started;
    assert.equal(error.code, 'upstream_timeout');
    assert.equal(error.status, 504);
    assert.match(error.message, /150 ms/);
    assert.ok(elapsed >= 100 && elapsed < 1500, `timed out after ${elapsed} ms`);
    await waitFor(() => server.closedConnections === 1);
    const exposition = await metrics.registry.metrics();
    assert.match(exposition, /colloquy_upstream_errors_total\{provider="tavily",code="upstream_timeout"\} 1/);
    assert.match(exposition, /colloquy_upstream_duration_seconds_count\{provider="tavily",outcome="timeout"\} 1/);
  });

  test('aborting the request signal rejects with its reason and closes the upstream connection at once', async () => {
    const server = await upstream({ stall: true });
    const { search } = provider('searxng', server.url, { timeoutMs: 10_000 });
    const controller = new AbortController();
    const pending = search.search('slow', { maxResults: 3 }, controller.signal);
    await waitFor(() => server.requests.length === 1);
    const reason = new Error('client went away');
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    await waitFor(() => server.closedConnections === 1);
  });

  test('a reset connection and a refused connection give upstream_error "could not be reached"', async () => {
    const reset = await upstream({ reset: true });
    const refused = await upstream({ status: 200, body: '' });
    const refusedUrl = refused.url;
    await refused.close();
    for (const url of [reset.url, refusedUrl]) {
      const error = await failure(provider('brave', url, { apiKey: KEY }).search);
      assert.equal(error.code, 'upstream_error');
      assert.match(error.message, /\(brave\) could not be reached/);
    }
  });

  test('a redirect is not followed: only the configured host is contacted', async () => {
    const elsewhere = await upstream(json(200, searchFixture('tavily-search.json')));
    const server = await upstream({ status: 307, body: '', headers: { location: `${elsewhere.url}/search` } });
    const error = await failure(provider('tavily', server.url, { apiKey: KEY }).search);
    assert.equal(error.code, 'upstream_error');
    assert.match(error.message, /redirect \(HTTP 307\), which is not followed/);
    assert.equal(elsewhere.requests.length, 0);
  });

  test('brave and tavily without an API key stop start-up with a ConfigError naming the key', () => {
    for (const kind of ['brave', 'tavily'] as const) {
      assert.throws(
        () => provider(kind, 'http://127.0.0.1:9'),
        (error) => error instanceof ConfigError && /api_key_env/.test(error.message),
      );
    }
    assert.throws(
      () => provider('searxng', undefined),
      (error) => error instanceof ConfigError && /search\.base_url/.test(error.message),
    );
  });
});
