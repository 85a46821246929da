import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse, startUpstream, type ReplayUpstream } from './helpers/upstream-replay.js';

const RESULTS = readFileSync(new URL('../../test/fixtures/search/searxng-results.json', import.meta.url), 'utf8');
const EMPTY = JSON.stringify({ query: 'nothing', number_of_results: 0, results: [] });

let search: ReplayUpstream;
let server: TestServer;

before(async () => {
  search = await startUpstream((request, response) => {
    const query = new URL(request.url ?? '/', 'http://x').searchParams.get('q') ?? '';
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(query.includes('zebra') ? EMPTY : RESULTS);
  });
  server = await bootServer({
    config: { search: { provider: 'searxng', base_url: search.url }, plans: { free: { quota: 100, window_seconds: 86_400 } } },
  });
});

after(async () => {
  await server.close();
  await search.close();
});

describe('chat with web_search through the pipeline', () => {
  test('the SSE sources event comes before the first delta and the answer cites the numbered sources', async () => {
    const events = parseSse(
      await (
        await server.post('/api/chat/stream', { message: 'How many write transactions can LMDB run?', web_search: { max_results: 3 } })
      ).text(),
    );
    const names = events.map((event) => event.event);
    assert.equal(names[0], 'start');
    assert.equal(names[1], 'sources');
    assert.ok(names.indexOf('delta') > names.indexOf('sources'));
    const sources = events[1]!.data.sources;
    assert.ok(sources.length >= 1 && sources.length <= 3);
    assert.deepEqual(
      sources.map((source: any) => source.index),
      sources.map((_: any, at: number) => at + 1),
    );
    for (const source of sources) assert.equal(source.kind, 'web');
    const answer = events
      .filter((event) => event.event === 'delta')
      .map((event) => event.data.text)
      .join('');
    assert.match(answer, /^According to the sources: /);
    const cited = [...answer.matchAll(/\[(\d+)\]/g)].map((match) => Number(match[1]));
    assert.ok(cited.length > 0);
    for (const index of cited) assert.ok(index >= 1 && index <= sources.length);
  });

  test('the NDJSON stream reports the search stage and a sources line before the result', async () => {
    const lines = (await (await server.post('/api/chat/progress', { message: 'LMDB write transaction', web_search: true })).text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const kinds = lines.map((line) => (line.type === 'progress' ? line.stage : line.type));
    assert.deepEqual(kinds, ['accepted', 'search', 'sources', 'generating', 'result']);
    assert.deepEqual(lines.at(-1).sources, lines[2].sources);
  });

  test('a search that finds nothing gives an empty sources list and the builtin says it found nothing', async () => {
    const body = (await (await server.post('/api/chat/', { message: 'zebra migration patterns', web_search: true })).json()) as any;
    assert.deepEqual(body.sources, []);
    assert.match(body.response, /^I found nothing about this in the knowledge base or the search results/);
  });
});
