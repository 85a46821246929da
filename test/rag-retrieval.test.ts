/**
 * Retrieval quality and the text pipeline behind it, on both storage engines: the fixture corpus is
 * ingested (over HTTP on LMDB, directly on Redis) and every fixture question must find its source
 * document in the top 3 with BM25 alone.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chunkText } from '../src/rag/chunk.js';
import { extractHtml, extractMarkdown, formatFromFileName, type DocumentFormat } from '../src/rag/extract.js';
import type { KnowledgeBase } from '../src/rag/knowledge-base.js';
import { sortedOrder } from '../src/rag/postings.js';
import { tokenize } from '../src/rag/tokenize.js';
import { ENGINES, engineStore } from './helpers/knowledge.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN = 'rag-retrieval-admin-token-0123456789';
const FIXTURES = new URL('../../test/fixtures/rag/', import.meta.url);
const CORPUS = new URL('corpus/', FIXTURES);

interface Question {
  question: string;
  document: string;
}

/** The fixture corpus indexed on one engine: over HTTP on a server (LMDB), or through the KnowledgeBase itself (Redis). */
interface IndexedCorpus {
  knowledge: KnowledgeBase;
  idsByFile: Map<string, string>;
  close(): Promise<void>;
}

function fixtureDocuments(): Array<{ file: string; title: string; text: string; format: DocumentFormat; collection: string }> {
  return readdirSync(CORPUS)
    .sort()
    .map((file) => {
      const format = formatFromFileName(file);
      assert.ok(format, `fixture ${file} has a supported extension`);
      return { file, title: file, text: readFileSync(new URL(file, CORPUS), 'utf8'), format, collection: 'fixtures' };
    });
}

/** LMDB: the server's knowledge base, documents posted to /api/rag/documents. */
async function indexOverHttp(): Promise<IndexedCorpus> {
  const server: TestServer = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: ADMIN } });
  const idsByFile = new Map<string, string>();
  for (const { file, ...document } of fixtureDocuments()) {
    const response = await server.post('/api/rag/documents', document, { authorization: `Bearer ${ADMIN}` });
    assert.equal(response.status, 201, await response.clone().text());
    const body = (await response.json()) as { document_id: string };
    idsByFile.set(file, body.document_id);
  }
  return { knowledge: server.services.knowledge, idsByFile, close: () => server.close() };
}

/** Redis: a knowledge base on its own redis-server, documents added directly. */
async function indexOnRedis(): Promise<IndexedCorpus> {
  const store = await engineStore('redis');
  const knowledge = await store.open({ chunkSize: 1000, chunkOverlap: 100, minScore: 0.5 });
  const idsByFile = new Map<string, string>();
  for (const { file, ...document } of fixtureDocuments()) idsByFile.set(file, (await knowledge.add(document)).document_id);
  return { knowledge, idsByFile, close: () => store.close() };
}

for (const engine of ENGINES) {
  describe(`knowledge-base retrieval on ${engine}`, () => {
    let corpus: IndexedCorpus;
    let idsByFile: Map<string, string>;

    before(async () => {
      corpus = engine === 'lmdb' ? await indexOverHttp() : await indexOnRedis();
      idsByFile = corpus.idsByFile;
    });

    after(() => corpus.close());
    it('finds the source document in the top 3 for at least 90% of the fixture questions with BM25 alone', async () => {
      const questions = JSON.parse(readFileSync(new URL('questions.json', FIXTURES), 'utf8')) as Question[];
      assert.ok(questions.length >= 30, 'at least 30 questions');
      assert.ok(idsByFile.size >= 24, 'a few dozen documents');
      const retriever = corpus.knowledge;
      let hits = 0;
      const misses: string[] = [];
      for (const { question, document } of questions) {
        const expected = idsByFile.get(document);
        assert.ok(expected, `question names a fixture document: ${document}`);
        const passages = await retriever.retrieve(question, { topK: 3, collection: 'fixtures' });
        if (passages.some((passage) => passage.documentId === expected)) hits += 1;
        else misses.push(`${question} -> ${passages.map((passage) => passage.title).join(', ') || '(nothing)'}`);
      }
      const hitRate = hits / questions.length;
      console.log(
        `# rag top-3 hit rate (BM25, ${engine}): ${hitRate.toFixed(3)} (${hits}/${questions.length} questions, ${idsByFile.size} documents)`,
      );
      for (const miss of misses) console.log(`#   miss: ${miss}`);
      assert.ok(hitRate >= 0.9, `top-3 hit rate ${hitRate.toFixed(3)} is below 0.9`);
    });

    it('ranks passages best first with scores and stays within the requested collection', async () => {
      const passages = await corpus.knowledge.retrieve('Eddystone lighthouse Plymouth granite', { topK: 5, collection: 'fixtures' });
      assert.ok(passages.length >= 1);
      assert.equal(passages[0]!.documentId, idsByFile.get('lighthouses.txt'));
      for (let index = 1; index < passages.length; index += 1) assert.ok(passages[index - 1]!.score >= passages[index]!.score);
      assert.deepEqual(await corpus.knowledge.retrieve('Eddystone lighthouse', { topK: 5, collection: 'elsewhere' }), []);
    });

    it('scores a whole document pasted as the question by its rarest terms and finds that document first', async () => {
      const text = readFileSync(new URL('tcp.md', CORPUS), 'utf8');
      const passages = await corpus.knowledge.retrieve(text, { topK: 3, collection: 'fixtures' });
      assert.equal(passages[0]?.documentId, idsByFile.get('tcp.md'));
    });

    it('returns nothing for a query that only shares stop words or unknown terms with the corpus', async () => {
      assert.deepEqual(await corpus.knowledge.retrieve('what is the of and', { topK: 3 }), []);
      assert.deepEqual(await corpus.knowledge.retrieve('zyxwvut qqqq', { topK: 3 }), []);
    });

    it("never indexes the text of an HTML page's scripts", async () => {
      const listed = await corpus.knowledge.list({ collection: 'fixtures', limit: 100 });
      const volcano = listed.find((document) => document.document_id === idsByFile.get('volcanoes.html'));
      assert.ok(volcano);
      // The script in the page mentions "tracking code"; it must not be searchable.
      const leaked = await corpus.knowledge.retrieve('analytics tracking code', { topK: 3, collection: 'fixtures' });
      assert.equal(
        leaked.some((passage) => passage.documentId === volcano.document_id),
        false,
      );
    });
  });
}

describe('text pipeline', () => {
  it('folds case, accents and plurals and splits CJK text into bigrams', () => {
    assert.deepEqual(tokenize('The CAFÉS of Zürich'), ['cafe', 'zurich']);
    assert.deepEqual(tokenize('Libraries and classes'), ['library', 'class']);
    assert.deepEqual(tokenize('東京都'), ['東京', '京都']);
    assert.deepEqual(tokenize('the and of', { stopWords: false }), ['the', 'and', 'of']);
  });

  it('tokenises ASCII text (its fast path) exactly as the general path does', () => {
    // The same text with an accented word appended takes the general path; that word's term comes last.
    const ascii = `Servers\tRUN 42 jobs  in 3d, x9y; classes,bosses & libraries! ${'z'.repeat(48)} ${'q'.repeat(49)} us is bus`;
    for (const stopWords of [true, false]) {
      const fast = tokenize(ascii, { stopWords });
      const general = tokenize(`${ascii} é`, { stopWords });
      assert.deepEqual(fast, general.slice(0, -1));
      assert.equal(general.at(-1), 'e');
    }
    assert.deepEqual(tokenize('Servers RUN 42 jobs in 3d classes bosses us bus'), [
      'server',
      'run',
      '42',
      'job',
      '3d',
      'class',
      'boss',
      'us',
      'bus',
    ]);
  });

  it('orders terms as a plain sort does (sortedOrder)', () => {
    let seed = 7;
    const next = () => {
      seed = (seed * 16807) % 2147483647;
      return seed / 2147483647;
    };
    const alphabet = ['a', 'b', 'ab', '\uffff', '\ufffe', '\u{1f600}', 'é', '0', '9', '東'];
    for (let trial = 0; trial < 100; trial += 1) {
      const set = new Set<string>();
      const size = 1 + Math.floor(next() * 400);
      while (set.size < size) {
        let text = '';
        const length = 1 + Math.floor(next() * 5);
        for (let at = 0; at < length; at += 1)
          text += trial % 3 === 0 ? String.fromCharCode(Math.floor(next() * 65536)) : alphabet[Math.floor(next() * alphabet.length)];
        set.add(text);
      }
      const strings = [...set];
      assert.deepEqual(
        Array.from(sortedOrder(strings), (index) => strings[index]),
        strings.slice().sort(),
      );
    }
  });

  it('extracts visible HTML text with entities decoded and block breaks kept', () => {
    const html =
      '<html><head><title>A &amp; B</title><style>p{color:red}</style></head><body><p>One&nbsp;two</p><script>alert(1)</script><ul><li>x</li><li>y</li></ul></body></html>';
    const extracted = extractHtml(html);
    assert.equal(extracted.title, 'A & B');
    // A no-break space is whitespace like any other once extracted.
    assert.equal(extracted.text, 'One two\n\nx\n\ny');
  });

  it('extracts Markdown text without markup and takes the first heading as title', () => {
    const extracted = extractMarkdown(
      '---\nlayout: x\n---\n# Title here\n\nSome **bold** and [a link](http://x.test) `code`.\n\n- item one\n',
    );
    assert.equal(extracted.title, 'Title here');
    assert.equal(extracted.text, 'Title here\n\nSome bold and a link code.\n\nitem one');
  });

  it('chunks near the target size with overlapping, deterministic chunks', () => {
    const sentences = Array.from({ length: 60 }, (_, index) => `Sentence number ${index} talks about topic ${index % 7}.`);
    const text = `${sentences.slice(0, 30).join(' ')}\n\n${sentences.slice(30).join(' ')}`;
    const chunks = chunkText(text, { size: 300, overlap: 60 });
    assert.ok(chunks.length >= 8, `got ${chunks.length} chunks`);
    for (const chunk of chunks) assert.ok(chunk.length <= 300, `chunk of ${chunk.length} chars`);
    for (let index = 1; index < chunks.length; index += 1) {
      const previousEnd = chunks[index - 1]!.slice(-60);
      const firstSentence = chunks[index]!.split('. ')[0]!;
      assert.ok(previousEnd.includes(firstSentence), `chunk ${index} starts with the end of chunk ${index - 1}`);
    }
    assert.deepEqual(chunkText(text, { size: 300, overlap: 60 }), chunks);
    // Every sentence survives chunking.
    for (const sentence of sentences)
      assert.ok(
        chunks.some((chunk) => chunk.includes(sentence)),
        sentence,
      );
  });

  it('reads a paragraph far longer than its segmenting window (many lines, no full stop) whole, cut only between words', () => {
    // Long paragraphs are segmented a window at a time (a whole-paragraph pass was quadratic).
    const lines = Array.from({ length: 3000 }, (_, line) => Array.from({ length: 8 }, (_, word) => `w${line}x${word}`).join(' '));
    const chunks = chunkText(lines.join('\n'), { size: 500, overlap: 0 });
    const words = chunks.flatMap((chunk) => chunk.split(/\s+/));
    assert.deepEqual(words, lines.join(' ').split(' '), 'every word once, whole, in order');
    for (const chunk of chunks) assert.ok(chunk.length <= 500);
  });

  it('cuts a sentence longer than a chunk at word boundaries', () => {
    const long = Array.from({ length: 400 }, (_, index) => `word${index}`).join(' ');
    const chunks = chunkText(long, { size: 200, overlap: 20 });
    for (const chunk of chunks) {
      assert.ok(chunk.length <= 200);
      assert.match(chunk, /^word\d+( word\d+)*$/);
    }
  });
});
