/**
 * Automatic1111 / Forge web UI API: POST {base}/sdapi/v1/txt2img answered by `images[]` (base64
 * PNG). While it works, GET {base}/sdapi/v1/progress reports `{progress, eta_relative}`; we poll it
 * so streamed replies can show real progress.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../errors.js';
import { imageFromBase64 } from './image-info.js';
import type { GeneratedImage, ImageProgress, ImageProvider, ImageRequest } from './types.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import { callUpstreamJson } from './image-call.js';
import { abortSignalOf, type CancelSignal } from '../domain/cancel.js';

export interface Automatic1111Options {
  baseUrl: string;
  /** `user:password` for a web UI started with --api-auth (sent as Basic), else a bearer token for a proxy in front. */
  apiKey: string | undefined;
  /** A checkpoint name; when set it is applied per request with override_settings. */
  model: string | undefined;
  timeoutMs: number;
  /** The upstream layer's metrics and log seam. */
  observer?: UpstreamObserver | undefined;
  /** How often progress is polled while a generation runs. */
  pollIntervalMs?: number;
}

/** Sampling steps per image: the web UI's own default. */
const STEPS = 20;
const DEFAULT_POLL_MS = 250;
/** A progress poll is small; it must not hold up anything for long. */
const POLL_TIMEOUT_MS = 5000;

/** The Automatic1111/Forge image provider. */
export class Automatic1111ImageProvider implements ImageProvider {
  readonly name = 'automatic1111';
  readonly model: string;
  readonly note = undefined;
  readonly reportsProgress = true;
  private readonly base: string;
  private readonly headers: Record<string, string>;

  constructor(private readonly options: Automatic1111Options) {
    this.model = options.model ?? 'automatic1111';
    this.base = options.baseUrl.replace(/\/+$/, '');
    const key = options.apiKey;
    this.headers = !key ? {} : { authorization: key.includes(':') ? `Basic ${Buffer.from(key).toString('base64')}` : `Bearer ${key}` };
  }

  async generate(request: ImageRequest, signal: CancelSignal, onProgress?: (progress: ImageProgress) => void): Promise<GeneratedImage[]> {
    const finished = new AbortController();
    const polling = onProgress
      ? this.pollProgress(AbortSignal.any([abortSignalOf(signal), finished.signal]), onProgress)
      : Promise.resolve();
    try {
      const body = await callUpstreamJson({
        label: 'automatic1111',
        observer: this.options.observer,
        provider: this.name,
        method: 'POST',
        url: `${this.base}/sdapi/v1/txt2img`,
        headers: this.headers,
        body: {
          prompt: request.prompt,
          width: request.width,
          height: request.height,
          batch_size: request.n,
          n_iter: 1,
          steps: STEPS,
          send_images: true,
          save_images: false,
          ...(this.options.model
            ? { override_settings: { sd_model_checkpoint: this.options.model }, override_settings_restore_afterwards: true }
            : {}),
        },
        signal,
        timeoutMs: this.options.timeoutMs,
      });
      const images = (body as { images?: unknown }).images;
      if (!Array.isArray(images) || images.length === 0) {
        throw new ApiError('upstream_error', 'The image provider (automatic1111) sent a reply without images.');
      }
      // Extensions (ControlNet and others) append their own maps after the batch: keep the batch.
      return images.slice(0, request.n).map((image) => imageFromBase64(image, 'automatic1111'));
    } finally {
      finished.abort();
      await polling;
    }
  }

  /**
   * Polls the web UI's progress until `signal` fires, reporting each increase. Progress is advisory:
   * a failed poll is skipped, and the web UI reports whichever job it is running (it runs one at a time).
   */
  private async pollProgress(signal: AbortSignal, onProgress: (progress: ImageProgress) => void): Promise<void> {
    let last = 0;
    const interval = this.options.pollIntervalMs ?? DEFAULT_POLL_MS;
    while (!signal.aborted) {
      try {
        await sleep(interval, undefined, { signal });
        const body = (await callUpstreamJson({
          label: 'automatic1111',
          observer: this.options.observer,
          provider: this.name,
          method: 'GET',
          url: `${this.base}/sdapi/v1/progress?skip_current_image=true`,
          headers: this.headers,
          signal,
          timeoutMs: Math.min(POLL_TIMEOUT_MS, this.options.timeoutMs),
          maxBytes: 1024 * 1024,
        })) as { progress?: unknown; eta_relative?: unknown };
        const progress = typeof body.progress === 'number' && Number.isFinite(body.progress) ? Math.min(1, Math.max(0, body.progress)) : 0;
        if (progress > last && !signal.aborted) {
          last = progress;
          const eta =
            typeof body.eta_relative === 'number' && Number.isFinite(body.eta_relative) && body.eta_relative >= 0
              ? body.eta_relative
              : undefined;
          onProgress({ progress, etaSeconds: eta });
        }
      } catch {
        // Aborted sleep or a failed poll: the loop condition decides whether to go on.
      }
    }
  }
}
