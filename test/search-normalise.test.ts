/**
 * What the search step does to upstream text before anyone cites it: URL identity for
 * de-duplication, HTML-free length-capped snippets, queries every upstream accepts, and snippets
 * of knowledge-base passages centred on the sentence that matches.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { focusedSnippet } from '../src/search/local.js';
import { cleanSnippet, dedupeResults, normaliseUrl, SNIPPET_MAX_CHARS, toSearchQuery } from '../src/search/normalise.js';

test('URLs that point at the same page normalise to one key', () => {
  const same = [
    'https://Example.COM/Docs/Page/?utm_source=x&b=2&a=1#section',
    'http://www.example.com/Docs/Page?a=1&b=2',
    'https://example.com:443/Docs/Page//?a=1&utm_medium=y&b=2&fbclid=abc',
  ];
  const keys = new Set(same.map(normaliseUrl));
  assert.deepEqual([...keys], ['example.com/Docs/Page?a=1&b=2']);
  // Path case and real parameters still tell pages apart.
  assert.notEqual(normaliseUrl('https://example.com/docs/page?a=1&b=2'), normaliseUrl(same[0]!));
  assert.notEqual(normaliseUrl('https://example.com/Docs/Page?a=2&b=2'), normaliseUrl(same[0]!));
  assert.notEqual(normaliseUrl('https://example.com:8443/Docs/Page?a=1&b=2'), normaliseUrl(same[0]!));
});

test('only absolute http(s) URLs have a key', () => {
  for (const bad of ['javascript:alert(1)', 'ftp://example.com/file', '/relative/path', '', 'data:text/html,hi']) {
    assert.equal(normaliseUrl(bad), undefined, bad);
  }
});

test('de-duplication keeps the first of each page, titles untitled hits by host, and stops at the limit', () => {
  const results = dedupeResults(
    [
      { title: 'First', url: 'https://example.com/a#x', snippet: 'one' },
      { title: 'Copy', url: 'https://EXAMPLE.com/a/?utm_source=feed', snippet: 'two' },
      { title: '', url: 'https://docs.example.org/b', snippet: 'three' },
      { title: 'Bad link', url: 'mailto:someone@example.com', snippet: 'four' },
      { title: '', url: 'https://example.net/c', snippet: '' },
      { title: 'Fourth', url: 'https://example.com/d', snippet: 'five' },
      { title: 'Fifth', url: 'https://example.com/e', snippet: 'six' },
    ],
    3,
  );
  assert.deepEqual(
    results.map((result) => [result.title, result.url]),
    [
      ['First', 'https://example.com/a#x'],
      ['docs.example.org', 'https://docs.example.org/b'],
      ['Fourth', 'https://example.com/d'],
    ],
  );
});

test('snippets lose their HTML, decode entities, drop scripts and collapse whitespace', () => {
  assert.equal(
    cleanSnippet('<p>Fish &amp; <b>chips</b></p><p>are&nbsp;served\n\n  daily.</p><script>var x = "<b>no</b>";</script><style>p{}</style>'),
    'Fish & chips are served daily.',
  );
  assert.equal(cleanSnippet('plain text, 3 < 4 and 5 > 2'), 'plain text, 3 < 4 and 5 > 2');
});

test('long snippets are cut at a word boundary within SNIPPET_MAX_CHARS and end with an ellipsis', () => {
  const long = `${'word '.repeat(400)}end`;
  const snippet = cleanSnippet(`<div>${long}</div>`);
  assert.ok(snippet.length <= SNIPPET_MAX_CHARS, `length ${snippet.length}`);
  assert.ok(snippet.length > SNIPPET_MAX_CHARS - 50);
  assert.match(snippet, /word…$/);
  const unbroken = cleanSnippet('x'.repeat(SNIPPET_MAX_CHARS * 3));
  assert.equal(unbroken.length, SNIPPET_MAX_CHARS);
});

test('queries become one line of at most 50 words and 400 characters', () => {
  assert.equal(toSearchQuery('  what is\n\tLMDB?  '), 'what is LMDB?');
  const many = Array.from({ length: 80 }, (_, index) => `w${index}`).join(' ');
  assert.equal(toSearchQuery(many).split(' ').length, 50);
  const long = toSearchQuery('abcdefghij '.repeat(60));
  assert.ok(long.length <= 400 && long.length > 380, `length ${long.length}`);
  assert.ok(!long.endsWith(' '));
});

test('a knowledge-base snippet is centred on the sentence that matches the question', () => {
  const passage = [
    'The harbour was built in 1820 to serve the fishing fleet.',
    'Later the town grew along the river and a market square appeared.',
    'Tourism arrived with the railway at the end of the century.',
    'The lighthouse keeper, Ada Brennan, lit the lamp every night for forty years.',
    'She retired in 1931 and the lamp was automated soon after.',
    'Today the building is a small museum about the coast.',
  ].join(' ');
  const snippet = focusedSnippet(passage, 'Who was the lighthouse keeper?', 140);
  assert.ok(snippet.length <= 140, `length ${snippet.length}`);
  assert.match(snippet, /^The lighthouse keeper, Ada Brennan, lit the lamp every night for forty years\./);
  // A short passage is kept whole.
  assert.equal(focusedSnippet('Short text.', 'anything'), 'Short text.');
});
