import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Source } from '../src/domain/types.js';
import { loadConfig } from '../src/config/index.js';
import { composeAnswer } from '../src/providers/builtin.js';
import { ThinkTagSplitter } from '../src/providers/think-tags.js';
import type { ProviderRequest } from '../src/providers/types.js';

const builtin = loadConfig({}, {}).models[0]!;

function request(question: string, sources: Source[], extra: Partial<ProviderRequest> = {}): ProviderRequest {
  return {
    model: builtin,
    messages: [{ role: 'user', content: question }],
    temperature: undefined,
    maxTokens: undefined,
    deepThinking: false,
    language: undefined,
    sources,
    ...extra,
  };
}

const SOURCES: Source[] = [
  {
    index: 1,
    kind: 'document',
    title: 'LMDB overview',
    snippet: 'LMDB is an embedded key-value store. It uses a single writer at a time. Readers never block the writer.',
  },
  {
    index: 2,
    kind: 'web',
    title: 'Bananas',
    url: 'https://example.org/bananas',
    snippet: 'Bananas are berries. They grow in clusters.',
  },
  {
    index: 3,
    kind: 'document',
    title: 'LMDB transactions',
    snippet: 'Write transactions in LMDB are serialized by a mutex. Many read transactions can run at once.',
  },
];

describe('builtin extractive model', () => {
  test('answers with the sentences that share the question’s rarer words, the best first, each cited', () => {
    const { answer, thinking } = composeAnswer(request('How many write transactions can LMDB run at once?', SOURCES));
    assert.equal(
      answer,
      'According to the sources: Many read transactions can run at once. [3] Write transactions in LMDB are serialized by a mutex. [3]',
    );
    assert.match(thinking, /come from \[3\]/);
    assert.ok(!answer.includes('Bananas'));
  });

  test('says the sources do not answer when no sentence matches, quoting the closest source', () => {
    const { answer } = composeAnswer(request('Quantum chromodynamics?', SOURCES));
    assert.equal(
      answer,
      'The sources found do not answer this directly. The closest one, "LMDB overview", says: LMDB is an embedded key-value store. [1]',
    );
  });

  test('is deterministic for the same input', () => {
    const one = composeAnswer(request('Do readers block writers in LMDB?', SOURCES));
    const two = composeAnswer(request('Do readers block writers in LMDB?', SOURCES));
    assert.deepEqual(one, two);
  });
});

describe('<think> tag splitting', () => {
  const text = 'Before<think>inner reasoning</think>after, and é ✓ <thin not a tag';

  test('every way of cutting the text in two gives the same thinking and answer', () => {
    for (let cut = 0; cut <= text.length; cut++) {
      const splitter = new ThinkTagSplitter();
      const pieces = [...splitter.push(text.slice(0, cut)), ...splitter.push(text.slice(cut)), ...splitter.flush()];
      const thinking = pieces
        .filter((piece) => piece.type === 'thinking')
        .map((piece) => piece.text)
        .join('');
      const answer = pieces
        .filter((piece) => piece.type === 'delta')
        .map((piece) => piece.text)
        .join('');
      assert.equal(thinking, 'inner reasoning', `cut at ${cut}`);
      assert.equal(answer, 'Beforeafter, and é ✓ <thin not a tag', `cut at ${cut}`);
    }
  });

  test('character by character gives the same result', () => {
    const splitter = new ThinkTagSplitter();
    const pieces = [...[...text].flatMap((character) => splitter.push(character)), ...splitter.flush()];
    assert.equal(
      pieces
        .filter((piece) => piece.type === 'delta')
        .map((piece) => piece.text)
        .join(''),
      'Beforeafter, and é ✓ <thin not a tag',
    );
  });
});
