import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';

/**
 * The built-in model answering from a small Markdown handbook: it reads like an answer (no heading,
 * list marker, table pipe or emphasis quoted as text) and leads with the sentence that answers.
 */

const ADMIN = { authorization: 'Bearer admin-handbook' };
const HANDBOOK = readFileSync(new URL('../../test/fixtures/rag/handbook.md', import.meta.url), 'utf8');

const CASES: Array<{ question: string; answer: string }> = [
  {
    question: 'How many days of holiday do full-time staff get?',
    answer: 'Full-time staff get 25 days of paid holiday a year, plus public holidays.',
  },
  { question: 'How far ahead must I ask for time off?', answer: 'Ask your manager at least two weeks before the first day off.' },
  { question: 'What are the core hours?', answer: 'Core hours are 10:00 to 16:00, Monday to Friday.' },
  {
    question: 'How many unused holiday days carry over?',
    answer: 'Up to five unused days carry over to the next year; the rest are lost on 31 March.',
  },
  { question: 'What is the hotel limit per night?', answer: 'Hotel per night: £150' },
  { question: 'When must a lost laptop be reported?', answer: 'Lost or stolen laptops must be reported to IT security within 24 hours.' },
  { question: 'How long do I have to submit an expense claim?', answer: 'Claims must be submitted within 30 days with a receipt.' },
];

let server: TestServer;

before(async () => {
  server = await bootServer({ env: { COLLOQUY_ADMIN_TOKEN: 'admin-handbook' } });
  const added = await server.post('/api/rag/documents', { title: 'Staff handbook', text: HANDBOOK }, ADMIN);
  assert.equal(added.status, 201);
});

after(async () => {
  await server.close();
});

describe('the built-in model answering from a Markdown handbook', () => {
  for (const { question, answer } of CASES) {
    test(`"${question}" is answered first by "${answer}"`, async () => {
      const body = (await (await server.post('/api/chat', { message: question, rag: true })).json()) as any;
      const text: string = body.response;
      assert.ok(text.startsWith(`According to the sources: ${answer} [1]`), text);
      // Markdown structure is read, never quoted.
      assert.doesNotMatch(text, /(^|\s)(#{1,6}|[-*+]|\d\.)\s|\||\*\*|`/);
    });
  }
});
