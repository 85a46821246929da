import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { decodePng, ndjsonLines } from './helpers/image-upstreams.js';
import { useImageProvider, type ErrorReply, type ImageReply } from './helpers/image-provider-rig.js';
import { until } from './helpers/wait.js';

const TXT2IMG = 'POST /sdapi/v1/txt2img';
const PROGRESS = 'GET /sdapi/v1/progress';

describe('POST /api/chat/image against an Automatic1111/Forge upstream', () => {
  const rig = useImageProvider({
    images: (url) => ({
      provider: 'automatic1111',
      base_url: url,
      api_key_env: 'WEBUI_AUTH',
      model: 'v1-5-pruned-emaonly',
      timeout_ms: 3000,
    }),
    env: { WEBUI_AUTH: 'painter:hunter22' },
  });

  /** Progress replies in the order the web UI would give them while one job runs. */
  function progressSequence(): void {
    let call = 0;
    rig.upstream.handlers.set(PROGRESS, () => ({ status: 200, fixture: `a1111-progress-${Math.min(3, ++call)}.json` }));
  }

  it('sends txt2img with size, batch, steps, the checkpoint and Basic auth, and keeps the batch it asked for', async () => {
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 200, fixture: 'a1111-txt2img-200.json' }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'a lighthouse', size: '512x512', n: 2 });
    assert.equal(response.status, 200);
    const body = (await response.json()) as ImageReply;

    const sent = rig.upstream.requests.find((request) => request.path === '/sdapi/v1/txt2img')!;
    assert.equal(sent.headers.authorization, `Basic ${Buffer.from('painter:hunter22').toString('base64')}`);
    assert.deepEqual(sent.body, {
      prompt: 'a lighthouse',
      width: 512,
      height: 512,
      batch_size: 2,
      n_iter: 1,
      steps: 20,
      send_images: true,
      save_images: false,
      override_settings: { sd_model_checkpoint: 'v1-5-pruned-emaonly' },
      override_settings_restore_afterwards: true,
    });
    // The fixture carries four images (a batch plus extension output); only the asked two come back.
    assert.equal(body.images.length, 2);
    assert.deepEqual(
      body.images.map((image) => decodePng(image.b64_json)),
      [
        { width: 64, height: 48 },
        { width: 40, height: 40 },
      ],
    );
    assert.deepEqual(
      body.images.map((image) => [image.width, image.height]),
      [
        [64, 48],
        [40, 40],
      ],
    );
    assert.equal(body.model, 'v1-5-pruned-emaonly');
    assert.equal(rig.upstream.count(PROGRESS), 0, 'a plain JSON request does not poll progress');
  });

  it('maps a 422 validation error to upstream_error with its reason, and gives the quota back', async () => {
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 422, fixture: 'a1111-txt2img-422.json' }));
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    const body = (await response.json()) as ErrorReply;
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /HTTP 422.*not a valid integer/);
    assert.equal(await rig.remaining(), before);
  });

  it('maps a 400 to upstream_error', async () => {
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 400, body: '{"detail":"Sampler not found"}' }));
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    assert.match(((await response.json()) as ErrorReply).error.message, /\(HTTP 400\): Sampler not found/);
  });

  it('maps a 500 to upstream_error without the traceback, and gives the quota back', async () => {
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 500, fixture: 'a1111-txt2img-500.json' }));
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 502);
    const text = await response.text();
    assert.doesNotMatch(text, /Traceback|CUDA|call_queue/);
    assert.equal((JSON.parse(text) as ErrorReply).error.code, 'upstream_error');
    assert.equal(await rig.remaining(), before);
  });

  it('answers 504 upstream_timeout when txt2img outlasts images.timeout_ms, and hangs up on the upstream', async () => {
    rig.upstream.handlers.set(TXT2IMG, () => ({ stall: true }));
    const cancelledBefore = rig.upstream.cancelled;
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' });
    assert.equal(response.status, 504);
    assert.equal(((await response.json()) as ErrorReply).error.code, 'upstream_timeout');
    assert.equal(await rig.remaining(), before);
    await until(() => rig.upstream.cancelled > cancelledBefore);
    assert.equal(rig.upstream.cancelled, cancelledBefore + 1);
  });

  it('streams the web UI progress as NDJSON lines, then the result', async () => {
    progressSequence();
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 200, fixture: 'a1111-txt2img-200.json', delayMs: 1200 }));
    const response = await rig.server.post(
      '/api/chat/image',
      { prompt: 'progress please', size: '256x256', n: 1 },
      { accept: 'application/x-ndjson' },
    );
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines = ndjsonLines(await response.text());
    assert.equal(lines[0]!.stage, 'accepted');
    assert.equal(lines[1]!.stage, 'generating');
    assert.equal(lines[1]!.progress, 0);
    const reported = lines.slice(2, -1);
    assert.ok(reported.length >= 1, 'at least one progress report from the web UI');
    for (const line of reported) {
      assert.equal(line.type, 'progress');
      assert.equal(line.stage, 'generating');
      assert.ok((line.progress as number) > 0 && (line.progress as number) <= 1);
      assert.equal(typeof line.eta_s, 'number');
    }
    const fractions = reported.map((line) => line.progress as number);
    assert.deepEqual(
      [...fractions].sort((a, b) => a - b),
      fractions,
    );
    assert.ok(
      fractions.every((value) => [0.25, 0.6, 0.95].includes(value)),
      `fractions come from the web UI: ${fractions}`,
    );
    const result = lines.at(-1)!;
    assert.equal(result.type, 'result');
    const images = result.images as ImageReply['images'];
    assert.equal(images.length, 1);
    assert.deepEqual(decodePng(images[0]!.b64_json), { width: 64, height: 48 });
    const polls = rig.upstream.count(PROGRESS);
    await sleep(400);
    assert.equal(rig.upstream.count(PROGRESS), polls, 'polling stops with the generation');
  });

  it('ends the NDJSON stream with an error line when txt2img fails after progress began', async () => {
    progressSequence();
    rig.upstream.handlers.set(TXT2IMG, () => ({ status: 500, fixture: 'a1111-txt2img-500.json', delayMs: 1200 }));
    const before = await rig.remaining();
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' }, { accept: 'application/x-ndjson' });
    const lines = ndjsonLines(await response.text());
    assert.ok(lines.some((line) => typeof line.progress === 'number' && (line.progress as number) > 0));
    assert.deepEqual(lines.at(-1), {
      type: 'error',
      error: { code: 'upstream_error', message: 'The image provider (automatic1111) failed (HTTP 500).' },
    });
    assert.equal(await rig.remaining(), before);
  });

  it('cancels txt2img and progress polling when the client disconnects', async () => {
    progressSequence();
    rig.upstream.handlers.set(TXT2IMG, () => ({ stall: true }));
    const cancelledBefore = rig.upstream.cancelled;
    const response = await rig.server.post('/api/chat/image', { prompt: 'x', size: '256x256' }, { accept: 'application/x-ndjson' });
    // Read the first lines, then drop the connection.
    const reader = response.body!.getReader();
    await reader.read();
    await reader.cancel();
    await until(() => rig.upstream.cancelled > cancelledBefore);
    assert.ok(rig.upstream.cancelled > cancelledBefore, 'the upstream txt2img call was hung up');
    const polls = rig.upstream.count(PROGRESS);
    await sleep(400);
    assert.equal(rig.upstream.count(PROGRESS), polls, 'no more progress polls after the client left');
  });
});
