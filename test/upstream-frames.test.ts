/**
 * The shared frame loop (readSse, readNdjson) over a scripted body, read with `for await` or pumped
 * to a taker: reads cut anywhere (inside a character, across the loop's slices) still give whole
 * frames to the dialect, events before a failure go out before it, and the body is handed back
 * exactly as `for await` would: once when the reader stops early or the reply ended at its
 * terminal frame, never after the body failed or ended.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type Dialect, readNdjson, readSse } from '../src/upstream/frames.js';

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
    try {
      return Promise.resolve(this.read());
    } catch (error) {
      return Promise.reject(error);
    }
  }
  /** The next scripted read; throws the failure once they are used up. */
  protected read(): IteratorResult<Uint8Array> {
    const value = this.reads.shift();
    if (value !== undefined) return { value, done: false };
    if (this.failure) throw this.failure;
    return { value: undefined, done: true };
  }
  return(): Promise<IteratorResult<Uint8Array>> {
    this.returned += 1;
    return Promise.resolve({ value: undefined, done: true });
  }
}

/**
 * A body that hands its reads to callbacks, as the upstream client's does: every other read is
 * ready at once (returned by `pull`), the others come later through a callback; counts `pull`s.
 */
class CallbackScriptedBody extends ScriptedBody {
  pulls = 0;
  pull(onRead: (result: IteratorResult<Uint8Array>) => void, onError: (error: unknown) => void): IteratorResult<Uint8Array> | undefined {
    this.pulls += 1;
    if (this.pulls % 2 === 1) return this.read();
    setImmediate(() => {
      let result: IteratorResult<Uint8Array>;
      try {
        result = this.read();
      } catch (error) {
        onError(error);
        return;
      }
      onRead(result);
    });
    return undefined;
  }
}

/** `bytes` cut into reads of `size` bytes (the last one shorter). */
function cut(bytes: Buffer, size: number): Uint8Array[] {
  const reads: Uint8Array[] = [];
  for (let offset = 0; offset < bytes.byteLength; offset += size) reads.push(bytes.subarray(offset, offset + size));
  return reads;
}

/**
 * A dialect of `{"word": …}` frames: each word is an event, `{"stop": true}` is the terminal frame,
 * `{"bad": true}` a malformed one; at the end `end` is added, unless `strict` and no terminal came.
 */
function wordDialect(strict = false): Dialect<{ data: string } | string, string> {
  return {
    frame(frame, out) {
      const json = JSON.parse(typeof frame === 'string' ? frame : frame.data) as { word?: string; stop?: boolean; bad?: boolean };
      if (json.bad) throw new Error('bad frame');
      if (json.stop) return true;
      out.push(json.word ?? '');
      return false;
    },
    end(out, terminal) {
      if (strict && !terminal) throw new Error('cut short');
      out.push(terminal ? 'end at stop' : 'end of body');
    },
  };
}

/** A dialect whose events are its frames' text as it came. */
const rawLines: Dialect<string, string> = {
  frame(frame, out) {
    out.push(frame);
    return false;
  },
  end() {},
};

/** Every event of a reply, in order. */
async function eventsOf(reply: AsyncIterable<string[]>): Promise<string[]> {
  const seen: string[] = [];
  for await (const batch of reply) {
    assert.ok(batch.length > 0, 'a batch is never empty');
    seen.push(...batch);
  }
  return seen;
}

const sseOf = (frames: object[]): Buffer => Buffer.from(frames.map((frame) => `data: ${JSON.stringify(frame)}\n\n`).join(''));
const words = Array.from({ length: 60 }, (_, index) => `mot ${index} é ü 😀 ${'x'.repeat(index * 7)}`);
const sse = Buffer.from(words.map((word) => `data: ${JSON.stringify({ word })}\n\n`).join(''));

describe('upstream frame loop', () => {
  for (const size of [1, 7, 1000, 5000, sse.byteLength]) {
    test(`SSE frames survive reads of ${size} bytes cut anywhere, inside characters and slices`, async () => {
      const seen = await eventsOf(readSse<string>(new ScriptedBody(cut(sse, size)), wordDialect(), 'test', 65_536));
      assert.deepEqual(seen, [...words, 'end of body']);
    });
  }

  test('NDJSON lines survive reads cut inside characters, and a last line without a newline is kept', async () => {
    const text = `${words.map((word) => JSON.stringify({ word })).join('\n')}\n\n  \n${JSON.stringify({ word: 'last' })}`;
    const seen = await eventsOf(readNdjson<string>(new ScriptedBody(cut(Buffer.from(text), 3)), wordDialect(), 'test', 65_536));
    assert.deepEqual(seen, [...words, 'last', 'end of body']);
  });

  test('a byte order mark opening the body is dropped, one cut in two reads too; invalid bytes become U+FFFD, and a character cut off at the end is one U+FFFD', async () => {
    for (const size of [1, 2, 1000]) {
      const body = Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('{"word":"first"}\n{"word":"caf'),
        Buffer.from([0xff]),
        Buffer.from('é"}\n'),
      ]);
      const seen = await eventsOf(readNdjson<string>(new ScriptedBody(cut(body, size)), wordDialect(), 'test', 65_536));
      assert.deepEqual(seen, ['first', 'caf\ufffdé', 'end of body'], `reads of ${size} bytes`);
    }
    const truncated = Buffer.concat([Buffer.from('{"word":"a"}\n"'), Buffer.from('é').subarray(0, 1)]);
    const lines = await eventsOf(readNdjson<string>(new ScriptedBody(cut(truncated, 1)), rawLines, 'test', 65_536));
    assert.deepEqual(lines, ['{"word":"a"}', '"\ufffd']);
  });

  test('any bytes cut anywhere decode as the whole body decodes at once (text ending inside a character or not)', async () => {
    const lineBytes = fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes.map((byte) => (byte === 0x0a ? 0x20 : byte))));
    await fc.assert(
      fc.asyncProperty(
        fc.array(lineBytes, { maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1 }),
        async (lines, sizes) => {
          const body = Buffer.concat(lines.flatMap((line) => [line, Buffer.from('\n')]));
          const reads: Uint8Array[] = [];
          for (let offset = 0, turn = 0; offset < body.byteLength; turn += 1) {
            const size = sizes[turn % sizes.length] as number;
            reads.push(body.subarray(offset, offset + size));
            offset += size;
          }
          const seen = await eventsOf(readNdjson<string>(new ScriptedBody(reads), rawLines, 'test', 65_536));
          const whole = new TextDecoder('utf-8').decode(body);
          assert.deepEqual(
            seen,
            whole
              .split('\n')
              .map((line) => line.trim())
              .filter((line) => line.length > 0),
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  test('the terminal frame ends the reply: nothing after it is read, and the body is handed back once', async () => {
    const body = new ScriptedBody(cut(sseOf([{ word: 'a' }, { word: 'b' }, { stop: true }, { word: 'after' }, { bad: true }]), 10));
    assert.deepEqual(await eventsOf(readSse<string>(body, wordDialect(true), 'test', 65_536)), ['a', 'b', 'end at stop']);
    assert.equal(body.returned, 1);
  });

  test('events before a bad frame go out before its error, and the body is handed back', async () => {
    const body = new ScriptedBody([sseOf([{ word: 'a' }, { word: 'b' }, { bad: true }, { word: 'c' }])]);
    const reply = readSse<string>(body, wordDialect(), 'test', 65_536);
    assert.deepEqual(await reply.next(), { value: ['a', 'b'], done: false });
    await assert.rejects(reply.next(), /bad frame/);
    assert.deepEqual(await reply.next(), { value: undefined, done: true });
    assert.equal(body.returned, 1);
  });

  test('a reply the dialect finds cut short fails after the events it had', async () => {
    const body = new ScriptedBody([sseOf([{ word: 'a' }])]);
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const batch of readSse<string>(body, wordDialect(true), 'test', 65_536)) seen.push(...batch);
    }, /cut short/);
    assert.deepEqual(seen, ['a']);
    assert.equal(body.returned, 0);
  });

  test('a reader that stops early hands the body back once; a body that ended or failed is not handed back', async () => {
    const early = new ScriptedBody(cut(sse, 100));
    for await (const batch of readSse<string>(early, wordDialect(), 'test', 65_536)) {
      assert.ok(batch.length > 0);
      break;
    }
    assert.equal(early.returned, 1);

    const ended = new ScriptedBody(cut(sse, 100));
    await eventsOf(readSse<string>(ended, wordDialect(), 'test', 65_536));
    assert.equal(ended.returned, 0);

    const failure = new Error('reset');
    const failing = new ScriptedBody(cut(sse, 100), failure);
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const batch of readSse<string>(failing, wordDialect(), 'test', 65_536)) seen.push(...batch);
      })(),
      (error) => error === failure,
    );
    assert.deepEqual(seen, words, 'every frame before the failure went out');
    assert.equal(failing.returned, 0);

    const lines = new ScriptedBody([Buffer.from('{"word":"a"}\n{"word":"b"}\n'), Buffer.from('{"word":"c"}\n')]);
    for await (const _batch of readNdjson<string>(lines, wordDialect(), 'test', 65_536)) break;
    assert.equal(lines.returned, 1);
  });

  test('pumped to a taker, frames cut anywhere come whole and in order, whether the body reads at once or through a callback', async () => {
    for (const size of [1, 7, 1000, sse.byteLength]) {
      const body = new CallbackScriptedBody(cut(sse, size));
      const seen: string[] = [];
      await readSse<string>(body, wordDialect(), 'test', 65_536).pump((batch) => {
        assert.ok(batch.length > 0, 'a batch is never empty');
        seen.push(...batch);
        return true;
      });
      assert.deepEqual(seen, [...words, 'end of body']);
      assert.ok(body.pulls >= Math.min(2, cut(sse, size).length), 'reads came both ways');
      assert.equal(body.returned, 0, 'a body that ended is not handed back');
    }
    // A body that only has next() is pumped too.
    const plain = new ScriptedBody(cut(Buffer.from('{"word":"a"}\n{"word":"b"}\n'), 5));
    const lines: string[] = [];
    await readNdjson<string>(plain, wordDialect(), 'test', 65_536).pump((batch) => lines.push(...batch) > 0);
    assert.deepEqual(lines, ['a', 'b', 'end of body']);
  });

  test('a taker that answers false stops the pump: no batch after it, and the body is handed back once', async () => {
    const body = new CallbackScriptedBody(cut(sse, 100));
    let batches = 0;
    await readSse<string>(body, wordDialect(), 'test', 65_536).pump(() => {
      batches += 1;
      return batches < 3;
    });
    assert.equal(batches, 3);
    assert.equal(body.returned, 1);

    const terminal = new CallbackScriptedBody(cut(sseOf([{ word: 'a' }, { stop: true }, { word: 'after' }]), 4));
    const seen: string[] = [];
    await readSse<string>(terminal, wordDialect(true), 'test', 65_536).pump((batch) => seen.push(...batch) > 0);
    assert.deepEqual(seen, ['a', 'end at stop']);
    assert.equal(terminal.returned, 1, 'a reply that ended at its terminal frame hands the body back');
  });

  test('while the taker waits, nothing more is read; its answer resumes or stops the pump', async () => {
    const body = new CallbackScriptedBody(cut(sse, 50));
    let release: ((more: boolean) => void) | undefined;
    let batches = 0;
    const pumped = readSse<string>(body, wordDialect(), 'test', 65_536).pump(() => {
      batches += 1;
      return batches === 1 ? new Promise<boolean>((resolve) => (release = resolve)) : true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const pullsWhileWaiting = body.pulls;
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(body.pulls, pullsWhileWaiting, 'no read while the taker holds the pump');
    assert.equal(batches, 1);
    release?.(true);
    await pumped;
    assert.ok(batches > 1);
    assert.equal(body.returned, 0);

    const stopped = new CallbackScriptedBody(cut(sse, 50));
    await readSse<string>(stopped, wordDialect(), 'test', 65_536).pump(() => Promise.resolve(false));
    assert.equal(stopped.returned, 1);
  });

  test('pumped, events before a failure are taken before the pump fails with it; a failed body is not handed back', async () => {
    const bad = new CallbackScriptedBody([sseOf([{ word: 'a' }, { word: 'b' }, { bad: true }, { word: 'c' }])]);
    const seen: string[] = [];
    await assert.rejects(
      readSse<string>(bad, wordDialect(), 'test', 65_536).pump((batch) => seen.push(...batch) > 0),
      /bad frame/,
    );
    assert.deepEqual(seen, ['a', 'b']);
    assert.equal(bad.returned, 1);

    const failure = new Error('reset');
    const failing = new CallbackScriptedBody(cut(sse, 100), failure);
    const before: string[] = [];
    await assert.rejects(
      readSse<string>(failing, wordDialect(), 'test', 65_536).pump((batch) => before.push(...batch) > 0),
      (error) => error === failure,
    );
    assert.deepEqual(before, words, 'every frame before the failure was taken');
    assert.equal(failing.returned, 0);

    const thrown = new CallbackScriptedBody(cut(sse, 100));
    await assert.rejects(
      readSse<string>(thrown, wordDialect(), 'test', 65_536).pump(() => {
        throw new Error('taker broke');
      }),
      /taker broke/,
    );
    assert.equal(thrown.returned, 1, 'a taker that throws hands the body back');
  });

  test('a frame over the bound fails the loop and hands the body back', async () => {
    const body = new ScriptedBody(cut(Buffer.from(`data: ${'y'.repeat(5000)}\n\n`), 512));
    await assert.rejects(
      eventsOf(readSse<string>(body, wordDialect(), 'test', 1024)),
      (error: unknown) => (error as { code?: string }).code === 'upstream_error',
    );
    assert.equal(body.returned, 1);

    const line = new ScriptedBody(cut(Buffer.from(`{"word":"${'y'.repeat(5000)}"}\n`), 512));
    await assert.rejects(
      eventsOf(readNdjson<string>(line, wordDialect(), 'test', 1024)),
      (error: unknown) => (error as { code?: string }).code === 'upstream_error',
    );
    assert.equal(line.returned, 1);
  });
});
