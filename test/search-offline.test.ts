/**
 * The offline default: with no search provider configured, POST /api/chat/search searches the
 * local knowledge base, says so in `search.provider`, and the built-in model answers a question
 * about an ingested document with a [1] citation. No network beyond the server itself.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'admin-token-for-offline-search';
let server: TestServer;

before(async () => {
  server = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
  const documents = [
    {
      title: 'Harbour lighthouse history',
      url: 'https://archive.example.org/lighthouse',
      text:
        'The harbour lighthouse was built in 1820 of local granite. ' +
        'Its first keeper was Ada Brennan, who lit the lamp every night for forty-one years. ' +
        'The lamp was automated in 1931, and the keeper cottage became a small museum.',
    },
    {
      title: 'Town market rules',
      text: 'The Saturday market opens at seven. Stalls are assigned by lot each spring, and fish must be sold before noon.',
    },
  ];
  for (const document of documents) {
    const response = await server.post('/api/rag/documents', document, { authorization: `Bearer ${ADMIN}` });
    assert.equal(response.status, 201, await response.clone().text());
  }
});

after(async () => {
  await server.close();
});

test('with nothing configured the search route answers from the knowledge base with a [1] citation, provider local and document sources', async () => {
  const response = await server.post('/api/chat/search', { message: 'Who was the first keeper of the lighthouse?' });
  assert.equal(response.status, 200);
  const body = (await response.json()) as any;
  assert.equal(body.model, 'builtin-extractive');
  assert.equal(body.search.provider, 'local');
  assert.equal(body.search.query, 'Who was the first keeper of the lighthouse?');
  assert.ok(body.search.result_count >= 1);
  assert.equal(body.sources[0].index, 1);
  assert.equal(body.sources[0].kind, 'document');
  assert.equal(body.sources[0].title, 'Harbour lighthouse history');
  assert.equal(body.sources[0].url, 'https://archive.example.org/lighthouse');
  assert.match(body.response, /Ada Brennan[^[]*\[1\]/);
});

test('web_search on the stream route uses the same offline search, sources before the first delta', async () => {
  const response = await server.post('/api/chat/stream', {
    message: 'When does the Saturday market open?',
    web_search: { max_results: 1 },
  });
  assert.equal(response.status, 200);
  const text = await response.text();
  const events = [...text.matchAll(/^event: (\w+)$/gm)].map((match) => match[1]);
  assert.ok(events.indexOf('sources') < events.indexOf('delta'), events.join(','));
  const sources = JSON.parse(/event: sources\ndata: (.*)\n/.exec(text)![1]!);
  assert.deepEqual(
    sources.sources.map((source: any) => source.title),
    ['Town market rules'],
  );
  assert.equal(sources.search.provider, 'local');
  const answer = [...text.matchAll(/event: delta\ndata: (.*)\n/g)].map((match) => JSON.parse(match[1]!).text).join('');
  assert.match(answer, /opens at seven[^[]*\[1\]/);
});
