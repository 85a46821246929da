import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bootServer, type TestServer } from './helpers/server.js';
import { decodePng, ndjsonLines } from './helpers/image-upstreams.js';

interface ImageReply {
  images: Array<{ mime_type: string; width: number; height: number; b64_json: string }>;
  model: string;
  note?: string;
  plan: string;
  remaining: number;
  reset: string;
  timestamp: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('POST /api/chat/image with the built-in renderer', () => {
  let server: TestServer;

  before(async () => {
    server = await bootServer({ config: { plans: { free: { quota: 1000, window_seconds: 86400 } } } });
  });
  after(() => server.close());

  it('draws n real PNGs of the asked size, each decodable, with the quota fields in the reply', async () => {
    const response = await server.post('/api/chat/image', { prompt: 'a lighthouse at dusk', size: '256x256', n: 3 });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /application\/json/);
    const body = (await response.json()) as ImageReply;
    assert.equal(body.images.length, 3);
    for (const image of body.images) {
      assert.equal(image.mime_type, 'image/png');
      assert.deepEqual(decodePng(image.b64_json), { width: 256, height: 256 });
      assert.equal(image.width, 256);
      assert.equal(image.height, 256);
    }
    assert.equal(new Set(body.images.map((image) => image.b64_json)).size, 3, 'the images of one request differ');
    assert.equal(body.model, 'builtin-abstract');
    assert.equal(body.plan, 'free');
    assert.equal(body.remaining, 995);
    assert.match(body.reset, ISO);
    assert.match(body.timestamp, ISO);
    assert.equal(response.headers.get('ratelimit-limit'), '1000');
    assert.equal(response.headers.get('ratelimit-remaining'), '995');
  });

  it('says in the reply that the built-in renderer is not a generative model', async () => {
    const response = await server.post('/api/chat/image', { prompt: 'a cat', size: '256x256' });
    const body = (await response.json()) as ImageReply;
    assert.match(body.note ?? '', /not a generative model/);
  });

  it('defaults to one 1024x1024 image', async () => {
    const response = await server.post('/api/chat/image', { prompt: 'mountains' });
    const body = (await response.json()) as ImageReply;
    assert.equal(body.images.length, 1);
    assert.deepEqual(decodePng(body.images[0]!.b64_json), { width: 1024, height: 1024 });
  });

  it('draws the same picture for the same prompt and a different one for another prompt', async () => {
    const first = (await (await server.post('/api/chat/image', { prompt: 'red fox', size: '512x512' })).json()) as ImageReply;
    const again = (await (await server.post('/api/chat/image', { prompt: 'red fox', size: '512x512' })).json()) as ImageReply;
    const other = (await (await server.post('/api/chat/image', { prompt: 'blue whale', size: '512x512' })).json()) as ImageReply;
    assert.equal(first.images[0]!.b64_json, again.images[0]!.b64_json);
    assert.notEqual(first.images[0]!.b64_json, other.images[0]!.b64_json);
    assert.deepEqual(decodePng(other.images[0]!.b64_json), { width: 512, height: 512 });
  });

  it('draws four 1024x1024 images in well under a few seconds', async () => {
    const started = performance.now();
    const response = await server.post('/api/chat/image', { prompt: 'speed check', size: '1024x1024', n: 4 });
    const body = (await response.json()) as ImageReply;
    const elapsed = performance.now() - started;
    assert.equal(body.images.length, 4);
    for (const image of body.images) assert.deepEqual(decodePng(image.b64_json), { width: 1024, height: 1024 });
    assert.ok(elapsed < 3000, `took ${Math.round(elapsed)} ms`);
  });

  it('refuses a bad request with invalid_request naming each failing field, and takes no quota', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'prompt'],
      [{ prompt: '   ' }, 'prompt'],
      [{ prompt: 'x'.repeat(4001) }, 'prompt'],
      [{ prompt: 'ok', size: '300x300' }, 'size'],
      [{ prompt: 'ok', n: 0 }, 'n'],
      [{ prompt: 'ok', n: 5 }, 'n'],
      [{ prompt: 'ok', n: 1.5 }, 'n'],
      [{ prompt: 'ok', model: 'dall-e-3' }, 'model'],
      [{ prompt: 'ok', style: 'vivid' }, 'style'],
      [[1, 2], '(body)'],
    ];
    const before = (await (await server.fetch('/api/chat/quota/me')).json()) as { remaining: number };
    for (const [body, path] of cases) {
      const response = await server.post('/api/chat/image', body);
      assert.equal(response.status, 400, JSON.stringify(body).slice(0, 60));
      const error = (await response.json()) as { error: { code: string; details: Array<{ path: string; message: string }> } };
      assert.equal(error.error.code, 'invalid_request');
      assert.ok(
        error.error.details.some((detail) => detail.path === path),
        `${JSON.stringify(error.error.details)} names ${path}`,
      );
    }
    const missing = (await (await server.post('/api/chat/image', {})).json()) as { error: { details: unknown } };
    assert.deepEqual(missing.error.details, [{ path: 'prompt', message: 'is required' }]);
    const unknown = (await (await server.post('/api/chat/image', { prompt: 'ok', style: 'vivid' })).json()) as {
      error: { details: unknown };
    };
    assert.deepEqual(unknown.error.details, [{ path: 'style', message: 'is not a known field' }]);
    const afterwards = (await (await server.fetch('/api/chat/quota/me')).json()) as { remaining: number };
    assert.equal(afterwards.remaining, before.remaining);
  });

  it('accepts a prompt of exactly 4000 characters and model set to the built-in id', async () => {
    const response = await server.post('/api/chat/image', { prompt: 'y'.repeat(4000), size: '256x256', model: 'builtin-abstract' });
    assert.equal(response.status, 200);
  });

  it('streams NDJSON progress lines and then the result when asked for application/x-ndjson', async () => {
    const response = await server.post(
      '/api/chat/image',
      { prompt: 'streamed', size: '256x256', n: 2 },
      { accept: 'application/x-ndjson' },
    );
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /application\/x-ndjson/);
    assert.ok(response.headers.get('ratelimit-remaining'));
    const lines = ndjsonLines(await response.text());
    assert.deepEqual(lines[0]?.type, 'progress');
    assert.equal(lines[0]?.stage, 'accepted');
    const progress = lines.filter((line) => line.stage === 'generating').map((line) => line.progress as number);
    assert.ok(progress.length >= 2, JSON.stringify(lines.slice(0, -1)));
    assert.deepEqual(
      [...progress].sort((a, b) => a - b),
      progress,
      'progress never goes back',
    );
    assert.equal(progress.at(-1), 1);
    for (const line of lines.slice(0, -1)) assert.equal(typeof line.elapsed_ms, 'number');
    const result = lines.at(-1)!;
    assert.equal(result.type, 'result');
    const images = result.images as ImageReply['images'];
    assert.equal(images.length, 2);
    for (const image of images) assert.deepEqual(decodePng(image.b64_json), { width: 256, height: 256 });
    assert.equal(result.model, 'builtin-abstract');
    assert.equal(typeof result.remaining, 'number');
  });

  it('counts generated images in /metrics', async () => {
    const text = await (await server.fetch('/metrics')).text();
    const match = /colloquy_images_generated_total\{provider="builtin"\} (\d+)/.exec(text);
    assert.ok(match, 'the counter is exported');
    assert.ok(Number(match[1]) >= 10);
    assert.match(text, /colloquy_image_generation_duration_seconds_count\{provider="builtin",outcome="ok"\} \d+/);
  });
});

describe('image quota cost', () => {
  it('costs 5 of the plan quota by default', async () => {
    const server = await bootServer();
    try {
      const response = await server.post('/api/chat/image', { prompt: 'cost check', size: '256x256', n: 4 });
      assert.equal(response.status, 200);
      const body = (await response.json()) as ImageReply;
      assert.equal(body.remaining, 45);
      assert.equal(response.headers.get('ratelimit-remaining'), '45');
    } finally {
      await server.close();
    }
  });

  it('takes the configured cost and refuses with 429 before drawing once the quota cannot pay', async () => {
    const server = await bootServer({ config: { plans: { free: { quota: 7, window_seconds: 3600 } }, costs: { image: 3 } } });
    try {
      const first = await server.post('/api/chat/image', { prompt: 'one', size: '256x256' });
      assert.equal(((await first.json()) as ImageReply).remaining, 4);
      const second = await server.post('/api/chat/image', { prompt: 'two', size: '256x256' });
      assert.equal(((await second.json()) as ImageReply).remaining, 1);
      const third = await server.post('/api/chat/image', { prompt: 'three', size: '256x256' }, { accept: 'application/x-ndjson' });
      assert.equal(third.status, 429);
      assert.match(third.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(((await third.json()) as { error: { code: string } }).error.code, 'quota_exceeded');
      assert.ok(Number(third.headers.get('retry-after')) > 0);
      assert.equal(third.headers.get('ratelimit-remaining'), '1');
      const metrics = await (await server.fetch('/metrics')).text();
      assert.match(metrics, /colloquy_images_generated_total\{provider="builtin"\} 2\b/);
    } finally {
      await server.close();
    }
  });
});
