/**
 * OpenAI-compatible image generation: POST {base}/images/generations with `response_format:
 * b64_json`, answered by `data[].b64_json`. Works with OpenAI itself and with servers that copy its
 * API (LocalAI and others).
 */
import { ApiError } from '../errors.js';
import { imageFromBase64 } from './image-info.js';
import type { GeneratedImage, ImageProvider, ImageRequest } from './types.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import { callUpstreamJson } from './image-call.js';
import type { CancelSignal } from '../domain/cancel.js';

export interface OpenAiImagesOptions {
  baseUrl: string;
  apiKey: string | undefined;
  /** Upstream model; dall-e-2 is the one that takes every size the contract offers and n up to 4. */
  model: string | undefined;
  timeoutMs: number;
  /** The upstream layer's metrics and log seam. */
  observer?: UpstreamObserver | undefined;
}

/** The OpenAI-compatible image provider. */
export class OpenAiImageProvider implements ImageProvider {
  readonly name = 'openai-images';
  readonly model: string;
  readonly note = undefined;
  readonly reportsProgress = false;
  private readonly url: string;

  constructor(private readonly options: OpenAiImagesOptions) {
    this.model = options.model ?? 'dall-e-2';
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/images/generations`;
  }

  async generate(request: ImageRequest, signal: CancelSignal): Promise<GeneratedImage[]> {
    const body = await callUpstreamJson({
      label: 'openai',
      observer: this.options.observer,
      provider: this.name,
      method: 'POST',
      url: this.url,
      headers: this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {},
      body: {
        model: this.model,
        prompt: request.prompt,
        n: request.n,
        size: `${request.width}x${request.height}`,
        response_format: 'b64_json',
      },
      signal,
      timeoutMs: this.options.timeoutMs,
    });
    const data = (body as { data?: unknown }).data;
    if (!Array.isArray(data) || data.length === 0) {
      throw new ApiError('upstream_error', 'The image provider (openai) sent a reply without images.');
    }
    return data.slice(0, request.n).map((item) => imageFromBase64((item as { b64_json?: unknown } | null)?.b64_json, 'openai'));
  }
}
