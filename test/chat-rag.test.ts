import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { parseSse } from './helpers/upstream-replay.js';

const ADMIN = 'chat-rag-admin-token-0123456789abcdef';

let server: TestServer;

async function ingest(document: Record<string, string>): Promise<void> {
  const response = await server.post('/api/rag/documents', document, { authorization: `Bearer ${ADMIN}` });
  assert.equal(response.status, 201, await response.clone().text());
}

before(async () => {
  server = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN }, config: { plans: { free: { quota: 100, window_seconds: 86_400 } } } });
  await ingest({
    title: 'Refund policy',
    url: 'https://example.com/refunds',
    collection: 'support',
    text: 'Refunds are issued within 14 days of a return. The refund goes back to the original payment method. Shipping costs are not refunded.',
  });
  await ingest({
    title: 'Office plants',
    collection: 'internal',
    text: 'The office ficus is watered every Tuesday. Cacti need water once a month.',
  });
});

after(async () => {
  await server.close();
});

describe('chat with rag through the pipeline', () => {
  test('retrieved passages become numbered document sources that the builtin answer cites', async () => {
    const body = (await (await server.post('/api/chat/', { message: 'How many days until refunds are issued?', rag: true })).json()) as any;
    assert.ok(body.sources.length >= 1);
    assert.deepEqual(body.sources[0], {
      index: 1,
      kind: 'document',
      title: 'Refund policy',
      url: 'https://example.com/refunds',
      snippet: body.sources[0].snippet,
    });
    assert.match(body.sources[0].snippet, /Refunds are issued within 14 days/);
    assert.match(body.response, /^According to the sources: .*Refunds are issued within 14 days of a return\. \[1\]/);
  });

  test('a collection limits retrieval to it and the NDJSON stream shows the retrieval stage and sources', async () => {
    const lines = (
      await (
        await server.post('/api/chat/progress', { message: 'When is the ficus watered?', rag: { top_k: 2, collection: 'internal' } })
      ).text()
    )
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const kinds = lines.map((line) => (line.type === 'progress' ? line.stage : line.type));
    assert.deepEqual(kinds, ['accepted', 'retrieval', 'sources', 'generating', 'result']);
    const sources = lines[2].sources;
    assert.ok(sources.length >= 1 && sources.length <= 2);
    for (const source of sources) assert.equal(source.title, 'Office plants');
    assert.match(lines.at(-1).response, /ficus is watered every Tuesday\. \[1\]/);
  });

  test('rag and web_search together number every source in one sequence, and SSE sends sources before the first delta', async () => {
    const events = parseSse(
      await (
        await server.post('/api/chat/stream', { message: 'refund shipping costs', rag: true, web_search: true, deep_thinking: true })
      ).text(),
    );
    const names = events.map((event) => event.event);
    assert.equal(names[1], 'sources');
    assert.ok(names.indexOf('thinking') > 1 && names.indexOf('delta') > names.indexOf('thinking'));
    const sources = events[1]!.data.sources;
    const kinds = sources.map((source: any) => source.kind);
    // Offline, the search step answers from the knowledge base too, so every source is a document.
    assert.ok(kinds.length >= 2);
    assert.ok(kinds.every((kind: string) => kind === 'document'));
    assert.deepEqual(
      sources.map((source: any) => source.index),
      sources.map((_: any, at: number) => at + 1),
    );
  });

  test('a collection that does not exist is a 404 naming it, before any quota is taken; rag: true searches every collection', async () => {
    const before = (await (await server.post('/api/chat/', { message: 'count me' })).json()) as { remaining: number };
    const response = await server.post('/api/chat/', { message: 'When is the ficus watered?', rag: { collection: 'no-such-shelf' } });
    assert.equal(response.status, 404);
    const body = (await response.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'not_found');
    assert.match(body.error.message, /"no-such-shelf"/);
    assert.equal(response.headers.get('ratelimit-remaining'), null, 'refused before the quota step');
    const all = (await (await server.post('/api/chat/', { message: 'When is the ficus watered?', rag: true })).json()) as {
      remaining: number;
      sources: Array<{ title: string }>;
    };
    assert.equal(all.remaining, before.remaining - 1, 'only the answered request was charged');
    assert.ok(
      all.sources.some((source) => source.title === 'Office plants'),
      'rag: true finds documents of any collection',
    );
  });

  test('retrieval time is measured', async () => {
    await (await server.post('/api/chat/', { message: 'refunds', rag: true })).text();
    const text = await (await server.fetch('/metrics')).text();
    assert.match(text, /colloquy_retrieval_duration_seconds_count [1-9]/);
  });
});
