/** Image generation behind one interface: OpenAI-compatible, Automatic1111/Forge, built-in renderer. */
export interface GeneratedImage {
  mime_type: string;
  width: number;
  height: number;
  b64_json: string;
}

export interface ImageRequest {
  prompt: string;
  width: number;
  height: number;
  n: number;
  model: string | undefined;
}

export interface ImageProgress {
  /** 0..1 */
  progress: number;
  etaSeconds: number | undefined;
}

export interface ImageProvider {
  readonly name: string;
  /** The id reported in `model`. */
  modelId(request: ImageRequest): string;
  generate(request: ImageRequest, signal: AbortSignal, onProgress?: (progress: ImageProgress) => void): Promise<GeneratedImage[]>;
}
