/**
 * Client for an OpenAI-compatible `POST {base_url}/embeddings` upstream. Vectors come back
 * L2-normalised so cosine similarity is a plain dot product at query time.
 */
import { ApiError } from '../errors.js';
import { callJson, type JsonReply } from '../upstream/json-call.js';
import type { UpstreamObserver } from '../upstream/observer.js';
import type { CancelSignal } from '../domain/cancel.js';

/** Upper bound on one batch's reply: 64 inputs of 3072 dimensions as JSON text stay well under it. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
const UNREACHABLE = 'The embeddings upstream could not be reached or sent malformed data.';

export interface EmbedderOptions {
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
  timeoutMs: number;
  /** The upstream layer's metrics and log seam. */
  observer?: UpstreamObserver | undefined;
  /** Inputs per upstream request. */
  batchSize?: number;
}

export interface Embedder {
  readonly model: string;
  /** One unit-length vector per input, in order. Throws ApiError on upstream failure. */
  embed(inputs: string[], signal?: CancelSignal): Promise<Float32Array[]>;
}

interface EmbeddingsResponse {
  data?: Array<{ index?: number; embedding?: unknown }>;
  usage?: { prompt_tokens?: unknown };
}

/** Vectors exactly as the upstream sent them, for clients of /v1/embeddings. */
export interface RawEmbeddings {
  vectors: number[][];
  /** The upstream's count of input tokens, when it reported one. */
  promptTokens: number | undefined;
}

/** Scales a vector to unit length (a zero vector stays zero). */
function normalise(values: ArrayLike<number>): Float32Array {
  const vector = Float32Array.from(values);
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let index = 0; index < vector.length; index += 1) vector[index]! /= norm;
  return vector;
}

/** An Embedder speaking the OpenAI embeddings wire format. */
export class OpenAiEmbedder implements Embedder {
  readonly model: string;
  private readonly url: string;
  private readonly batchSize: number;

  constructor(private readonly options: EmbedderOptions) {
    this.model = options.model;
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
    this.batchSize = options.batchSize ?? 64;
  }

  async embed(inputs: string[], signal?: CancelSignal): Promise<Float32Array[]> {
    const vectors: Float32Array[] = [];
    for (let start = 0; start < inputs.length; start += this.batchSize) {
      const batch = await this.embedBatch(inputs.slice(start, start + this.batchSize), {}, signal);
      for (const vector of batch.vectors) vectors.push(normalise(vector));
    }
    return vectors;
  }

  /** The upstream's vectors for `inputs` in one request, unnormalised (what /v1/embeddings passes on). */
  embedRaw(inputs: string[], extra: { dimensions?: number }, signal?: CancelSignal): Promise<RawEmbeddings> {
    return this.embedBatch(inputs, extra, signal);
  }

  private async embedBatch(inputs: string[], extra: { dimensions?: number }, signal: CancelSignal | undefined): Promise<RawEmbeddings> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    let reply: JsonReply;
    try {
      reply = await callJson({
        subject: 'The embeddings upstream',
        provider: 'embeddings',
        ...(this.options.observer ? { observer: this.options.observer } : {}),
        url: this.url,
        method: 'POST',
        headers,
        body: JSON.stringify({ model: this.model, input: inputs, ...extra }),
        signal,
        timeoutMs: this.options.timeoutMs,
        maxBytes: MAX_RESPONSE_BYTES,
        wording: { timeout: 'The embeddings upstream did not answer in time.', unreachable: UNREACHABLE },
      });
    } catch (error) {
      // Anything but an ApiError is the caller's abort reason; it still has to leave as an ApiError.
      if (error instanceof ApiError) throw error;
      throw new ApiError('invalid_request', 'The request was cancelled.');
    }
    if (reply.status < 200 || reply.status >= 300)
      throw new ApiError('upstream_error', `The embeddings upstream answered ${reply.status}.`);
    if (reply.json === undefined) throw new ApiError('upstream_error', UNREACHABLE);
    // A JSON `null` reply is a wrong shape like any other, not a crash.
    const body = (reply.json ?? {}) as EmbeddingsResponse;
    const data = Array.isArray(body.data) ? body.data : [];
    if (data.length !== inputs.length) {
      throw new ApiError('upstream_error', `The embeddings upstream returned ${data.length} vectors for ${inputs.length} inputs.`);
    }
    const ordered = [...data].sort((left, right) => (left.index ?? 0) - (right.index ?? 0));
    let dimensions: number | undefined;
    const vectors = ordered.map((item) => {
      const embedding = item.embedding;
      if (
        !Array.isArray(embedding) ||
        embedding.length === 0 ||
        !embedding.every((value) => typeof value === 'number' && Number.isFinite(value))
      ) {
        throw new ApiError('upstream_error', 'The embeddings upstream returned a malformed vector.');
      }
      dimensions ??= embedding.length;
      if (embedding.length !== dimensions)
        throw new ApiError('upstream_error', 'The embeddings upstream returned vectors of different sizes.');
      return embedding as number[];
    });
    const promptTokens = body.usage?.prompt_tokens;
    return { vectors, promptTokens: typeof promptTokens === 'number' && Number.isFinite(promptTokens) ? promptTokens : undefined };
  }
}
