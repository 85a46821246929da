/** Image generation behind one interface: OpenAI-compatible, Automatic1111/Forge, built-in renderer. */
import type { CancelSignal } from '../domain/cancel.js';
export interface GeneratedImage {
  mime_type: string;
  width: number;
  height: number;
  b64_json: string;
}

/** A validated request, as the route hands it to a provider. */
export interface ImageRequest {
  prompt: string;
  width: number;
  height: number;
  n: number;
}

export interface ImageProgress {
  /** 0..1 */
  progress: number;
  etaSeconds: number | undefined;
}

export interface ImageProvider {
  /** Short provider name used in metrics labels and logs (`builtin`, `openai-images`, `automatic1111`). */
  readonly name: string;
  /** The id reported in `model`; the only value a request's `model` may name. */
  readonly model: string;
  /** A sentence added to every reply as `note` (the built-in renderer says it is not a generative model). */
  readonly note: string | undefined;
  /** True when the provider reports progress while it works (so NDJSON lines carry a fraction). */
  readonly reportsProgress: boolean;
  /**
   * Produces `request.n` images (an upstream may return fewer; never zero). Throws ApiError
   * `upstream_error` / `upstream_timeout`; stops at once when `signal` fires.
   */
  generate(request: ImageRequest, signal: CancelSignal, onProgress?: (progress: ImageProgress) => void): Promise<GeneratedImage[]>;
}
