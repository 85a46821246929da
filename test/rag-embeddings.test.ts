/**
 * Hybrid retrieval: with an OpenAI-compatible embeddings upstream configured, chunk vectors are
 * stored and fused with BM25 by reciprocal rank. The upstream is a real loopback HTTP server.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'rag-embeddings-admin-token-0123456789';
const auth = { authorization: `Bearer ${ADMIN}` };
const concepts = JSON.parse(readFileSync(new URL('../../test/fixtures/rag/embedding-concepts.json', import.meta.url), 'utf8')) as {
  model: string;
  groups: string[][];
};

/** Counts each concept group's words: the loopback upstream's embedding. */
function embed(text: string): number[] {
  const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
  return concepts.groups.map((group) => words.filter((word) => group.includes(word)).length);
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe('hybrid retrieval with an embeddings upstream', () => {
  let upstream: Server;
  let server: TestServer;
  let failing = false;
  const authorizations: Array<string | undefined> = [];
  let calls = 0;

  before(async () => {
    upstream = createServer(async (request, response) => {
      const body = JSON.parse(await readBody(request)) as { model: string; input: string[] };
      calls += 1;
      authorizations.push(request.headers.authorization);
      if (failing || request.url !== '/v1/embeddings') {
        response.writeHead(failing ? 500 : 404, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'upstream down', type: 'server_error' } }));
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          object: 'list',
          model: body.model,
          data: body.input.map((input, index) => ({ object: 'embedding', index, embedding: embed(input) })),
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }),
      );
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN, EMBED_KEY: 'embed-secret-key' },
      config: { rag: { embeddings: { base_url: `http://127.0.0.1:${port}/v1`, model: concepts.model, api_key_env: 'EMBED_KEY' } } },
    });
    for (const document of [
      { title: 'Shoreline', text: 'Twice a day the tide rises along the coast and the waves reach the dunes.' },
      { title: 'Kitchen', text: 'Knead the dough, let the yeast work, then bake the loaf in a hot oven.' },
      { title: 'Observatory', text: 'Through the telescope the planet shows its orbit among the stars.' },
    ]) {
      assert.equal((await server.post('/api/rag/documents', document, auth)).status, 201);
    }
  });

  after(async () => {
    await server.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  it('reports a hybrid retriever with the embedding model in stats', async () => {
    const stats = (await (await server.fetch('/api/chat/rag/stats')).json()) as { retriever: unknown };
    assert.deepEqual(stats.retriever, { kind: 'hybrid', embedding_model: concepts.model });
  });

  it('sends the configured key to the embeddings upstream', () => {
    assert.ok(authorizations.length > 0);
    assert.ok(authorizations.every((value) => value === 'Bearer embed-secret-key'));
  });

  it('finds a passage that shares no word with the query through its vector', async () => {
    const retriever = server.services.knowledge;
    const passages = await retriever.retrieve('marine saltwater', { topK: 2 });
    assert.equal(passages[0]?.title, 'Shoreline');
    assert.equal(passages.length, 1, 'unrelated chunks fall below the similarity threshold');
  });

  it('ranks a passage matching both lexically and by vector first', async () => {
    const passages = await server.services.knowledge.retrieve('telescope galaxy', { topK: 3 });
    assert.equal(passages[0]?.title, 'Observatory');
    assert.ok(passages[0]!.score > 0);
  });

  it('falls back to BM25 alone when the embeddings upstream fails at query time', async () => {
    failing = true;
    try {
      const before = calls;
      const lexical = await server.services.knowledge.retrieve('knead the dough', { topK: 3 });
      assert.ok(calls > before, 'the upstream was asked');
      assert.equal(lexical[0]?.title, 'Kitchen');
      assert.deepEqual(await server.services.knowledge.retrieve('marine saltwater', { topK: 3 }), []);
    } finally {
      failing = false;
    }
  });

  it('answers 502 upstream_error and indexes nothing when embedding a new document fails', async () => {
    failing = true;
    try {
      const response = await server.post('/api/rag/documents', { title: 'Concert', text: 'The orchestra played a quiet melody.' }, auth);
      assert.equal(response.status, 502);
      const body = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'upstream_error');
      assert.doesNotMatch(body.error.message, /embed-secret-key/);
    } finally {
      failing = false;
    }
    assert.deepEqual(await server.services.knowledge.retrieve('orchestra melody', { topK: 3 }), []);
    const stats = (await (await server.fetch('/api/chat/rag/stats')).json()) as { documents: number };
    assert.equal(stats.documents, 3);
  });
});
