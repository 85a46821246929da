import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bootServer } from './helpers/server.js';
import { decodePng, startImageUpstream } from './helpers/image-upstreams.js';
import { useImageProvider, type ErrorReply, type ImageReply } from './helpers/image-provider-rig.js';

const SECRET = 'sk-test-abcdefghijklmnopqrstuvwx3456';
const GENERATIONS = 'POST /v1/images/generations';

describe('POST /api/chat/image against an OpenAI-compatible upstream', () => {
  const rig = useImageProvider({
    images: (url) => ({ provider: 'openai', base_url: `${url}/v1`, api_key_env: 'IMAGES_KEY', model: 'dall-e-2', timeout_ms: 400 }),
    env: { IMAGES_KEY: SECRET },
  });

  it('sends the OpenAI request shape with the key and returns the decoded images with their real sizes', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 200, fixture: 'openai-generations-200.json' }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'a lighthouse', size: '512x512', n: 2 });
    assert.equal(response.status, 200);
    const body = (await response.json()) as ImageReply;

    assert.equal(rig.upstream.requests.length, 1);
    const sent = rig.upstream.requests[0]!;
    assert.equal(sent.headers.authorization, `Bearer ${SECRET}`);
    assert.deepEqual(sent.body, { model: 'dall-e-2', prompt: 'a lighthouse', n: 2, size: '512x512', response_format: 'b64_json' });

    assert.equal(body.model, 'dall-e-2');
    assert.equal(body.note, undefined);
    assert.equal(body.images.length, 2);
    // The fixture holds a 64x48 and a 40x40 PNG: the reply reports what the upstream really sent.
    assert.deepEqual(
      body.images.map((image) => decodePng(image.b64_json)),
      [
        { width: 64, height: 48 },
        { width: 40, height: 40 },
      ],
    );
    assert.deepEqual(
      body.images.map((image) => [image.mime_type, image.width, image.height]),
      [
        ['image/png', 64, 48],
        ['image/png', 40, 40],
      ],
    );
    assert.equal(body.remaining, 95);
  });

  it('maps an upstream 400 to upstream_error with its reason, and gives the quota back', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 400, fixture: 'openai-generations-400.json' }));
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'something refused', size: '256x256' });
    assert.equal(response.status, 502);
    const body = (await response.json()) as ErrorReply;
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /HTTP 400/);
    assert.match(body.error.message, /safety system/);
    assert.equal(await rig.remaining(), before);
  });

  it('removes anything that looks like a credential from a passed-on 400 reason', async () => {
    const message = `Invalid 'user': Bearer ${SECRET} is not allowed; key sk-live-0123456789abcdef was revoked`;
    rig.upstream.handlers.set(GENERATIONS, () => ({
      status: 400,
      body: JSON.stringify({ error: { message, type: 'invalid_request_error' } }),
    }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    const text = await response.text();
    assert.equal(response.status, 502);
    assert.doesNotMatch(text, /sk-test|sk-live|0123456789abcdef|abcdefghijklmnop/);
    assert.match(text, /Invalid 'user'/);
  });

  it('never shows the upstream key, even when the upstream echoes part of it', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 401, fixture: 'openai-generations-401.json' }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    const text = await response.text();
    assert.doesNotMatch(text, /sk-test|3456|api-keys/);
    assert.equal((JSON.parse(text) as ErrorReply).error.code, 'upstream_error');
  });

  it('maps an upstream 500 to upstream_error without upstream internals, and gives the quota back', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 500, fixture: 'openai-generations-500.json' }));
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    const body = (await response.json()) as ErrorReply;
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /HTTP 500/);
    assert.doesNotMatch(body.error.message, /Sorry about that/);
    assert.equal(await rig.remaining(), before);
  });

  it('answers 504 upstream_timeout when the upstream does not answer within images.timeout_ms', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ stall: true }));
    const before = await rig.remaining();
    const started = performance.now();
    const response = await rig.server.post('/api/chat/image', { prompt: 'slow', size: '256x256' });
    const elapsed = performance.now() - started;
    assert.equal(response.status, 504);
    assert.equal(((await response.json()) as ErrorReply).error.code, 'upstream_timeout');
    assert.ok(elapsed >= 350 && elapsed < 3000, `answered after ${Math.round(elapsed)} ms`);
    assert.equal(await rig.remaining(), before);
  });

  it('refuses an upstream reply whose image is not a PNG', async () => {
    const notPng = Buffer.from('GIF89a not really an image at all, just some bytes').toString('base64');
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 200, body: JSON.stringify({ created: 1, data: [{ b64_json: notPng }] }) }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    assert.match(((await response.json()) as ErrorReply).error.message, /not a PNG/);
  });

  it('refuses an upstream reply that is not JSON or has no images', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 200, body: '<html>proxy error</html>', contentType: 'text/html' }));
    const html = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(html.status, 502);
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 200, body: '{"created":1,"data":[]}' }));
    const empty = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(empty.status, 502);
    assert.match(((await empty.json()) as ErrorReply).error.message, /without images/);
  });

  it('streams accepted and generating lines then the result over NDJSON, or an error line on failure', async () => {
    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 200, fixture: 'openai-generations-200.json', delayMs: 50 }));
    const ok = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' }, { accept: 'application/x-ndjson' });
    const okLines = (await ok.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(
      okLines.map((line) => line.stage ?? line.type),
      ['accepted', 'generating', 'result'],
    );
    // This upstream reports no progress, so the generating line carries no fraction.
    assert.equal(okLines[1]!.progress, undefined);
    const images = okLines[2]!.images as ImageReply['images'];
    assert.deepEqual(decodePng(images[0]!.b64_json), { width: 64, height: 48 });

    rig.upstream.handlers.set(GENERATIONS, () => ({ status: 500, fixture: 'openai-generations-500.json' }));
    const before = await rig.remaining();
    const failed = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' }, { accept: 'application/x-ndjson' });
    assert.equal(failed.status, 200);
    const failedLines = (await failed.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(failedLines.at(-1), {
      type: 'error',
      error: { code: 'upstream_error', message: 'The image provider (openai) failed (HTTP 500).' },
    });
    assert.equal(await rig.remaining(), before);
  });

  it('counts upstream failures by provider and code in /metrics', async () => {
    const text = await (await rig.server.fetch('/metrics')).text();
    assert.match(text, /colloquy_upstream_errors_total\{provider="openai-images",code="upstream_error"\} [1-9]/);
    assert.match(text, /colloquy_upstream_errors_total\{provider="openai-images",code="upstream_timeout"\} 1/);
    assert.match(text, /colloquy_images_generated_total\{provider="openai-images"\} [1-9]/);
  });
});

describe('POST /api/chat/image when the OpenAI-compatible upstream is not reachable', () => {
  it('answers 502 upstream_error and gives the quota back', async () => {
    const gone = await startImageUpstream();
    const url = gone.url;
    await gone.close();
    const server = await bootServer({ config: { images: { provider: 'openai', base_url: `${url}/v1`, timeout_ms: 2000 } } });
    try {
      const response = await server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
      assert.equal(response.status, 502);
      const body = (await response.json()) as ErrorReply;
      assert.equal(body.error.code, 'upstream_error');
      assert.match(body.error.message, /could not be reached/);
      const quota = (await (await server.fetch('/api/chat/quota/me')).json()) as { remaining: number };
      assert.equal(quota.remaining, 50);
    } finally {
      await server.close();
    }
  });
});
