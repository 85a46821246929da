/**
 * The shared frame loops (sseFrames, ndjsonLines) over a scripted body: reads cut anywhere (inside
 * a character, across the parser's slices) still give whole frames, and the body is handed back
 * exactly as `for await` would: once when the reader stops early, never after it failed or ended.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ndjsonLines, sseFrames } from '../src/upstream/frames.js';

/** An async body that yields the given reads, then fails if asked to; counts `return` calls. */
class ScriptedBody implements AsyncIterableIterator<Uint8Array> {
  returned = 0;
  constructor(
    private readonly reads: Uint8Array[],
    private readonly failure?: Error,
  ) {}
  [Symbol.asyncIterator](): this {
    return this;
  }
  next(): Promise<IteratorResult<Uint8Array>> {
    const value = this.reads.shift();
    if (value !== undefined) return Promise.resolve({ value, done: false });
    if (this.failure) return Promise.reject(this.failure);
    return Promise.resolve({ value: undefined, done: true });
  }
  return(): Promise<IteratorResult<Uint8Array>> {
    this.returned += 1;
    return Promise.resolve({ value: undefined, done: true });
  }
}

/** `bytes` cut into reads of `size` bytes (the last one shorter). */
function cut(bytes: Buffer, size: number): Uint8Array[] {
  const reads: Uint8Array[] = [];
  for (let offset = 0; offset < bytes.byteLength; offset += size) reads.push(bytes.subarray(offset, offset + size));
  return reads;
}

const words = Array.from({ length: 60 }, (_, index) => `mot ${index} é ü 😀 ${'x'.repeat(index * 7)}`);
const sse = Buffer.from(words.map((word) => `data: ${JSON.stringify({ word })}\n\n`).join(''));

describe('upstream frame loops', () => {
  for (const size of [1, 7, 1000, 5000, sse.byteLength]) {
    test(`SSE frames survive reads of ${size} bytes cut anywhere, inside characters and slices`, async () => {
      const seen: string[] = [];
      for await (const batch of sseFrames(new ScriptedBody(cut(sse, size)), 'test', 65_536)) {
        for (const frame of batch) seen.push((JSON.parse(frame.data) as { word: string }).word);
      }
      assert.deepEqual(seen, words);
    });
  }

  test('NDJSON lines survive reads cut inside characters, and a last line without a newline is kept', async () => {
    const text = `${words.map((word) => JSON.stringify({ word })).join('\n')}\n${JSON.stringify({ word: 'last' })}`;
    const seen: string[] = [];
    for await (const lines of ndjsonLines(new ScriptedBody(cut(Buffer.from(text), 3)), 'test', 65_536)) {
      for (const line of lines) seen.push((JSON.parse(line) as { word: string }).word);
    }
    assert.deepEqual(seen, [...words, 'last']);
  });

  test('a reader that stops early hands the body back once; a body that ended or failed is not handed back', async () => {
    const early = new ScriptedBody(cut(sse, 100));
    for await (const batch of sseFrames(early, 'test', 65_536)) {
      assert.ok(batch.length > 0);
      break;
    }
    assert.equal(early.returned, 1);

    const ended = new ScriptedBody(cut(sse, 100));
    for await (const _batch of sseFrames(ended, 'test', 65_536));
    assert.equal(ended.returned, 0);

    const failure = new Error('reset');
    const failing = new ScriptedBody(cut(sse, 100), failure);
    await assert.rejects(
      (async () => {
        for await (const _batch of sseFrames(failing, 'test', 65_536));
      })(),
      (error) => error === failure,
    );
    assert.equal(failing.returned, 0);

    const lines = new ScriptedBody([Buffer.from('{"a":1}\n{"a":2}\n'), Buffer.from('{"a":3}\n')]);
    for await (const _batch of ndjsonLines(lines, 'test', 65_536)) break;
    assert.equal(lines.returned, 1);
  });

  test('a frame over the bound fails the loop and hands the body back', async () => {
    const body = new ScriptedBody(cut(Buffer.from(`data: ${'y'.repeat(5000)}\n\n`), 512));
    await assert.rejects(
      (async () => {
        for await (const _batch of sseFrames(body, 'test', 1024));
      })(),
      (error: unknown) => (error as { code?: string }).code === 'upstream_error',
    );
    assert.equal(body.returned, 1);
  });
});
