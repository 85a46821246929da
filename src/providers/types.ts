/**
 * What every upstream dialect (openai, anthropic, ollama, builtin) implements: turn one normalised
 * request into a stream of normalised events, honouring the abort signal.
 */
import type { BatchTaker, FinishReason, Source, ToolCall, ToolCallFragment } from '../domain/types.js';
import type { ModelConfig } from '../config/index.js';
import type { CancelSignal } from '../domain/cancel.js';

/** An image a user message carries: a `data:` URL (base64) or an http(s) URL. */
export interface ImageInput {
  url: string;
  detail?: 'auto' | 'low' | 'high';
}

/** One message of the conversation a provider reads, in the shape every dialect translates from. */
export type ProviderMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string; images?: ImageInput[] }
  | { role: 'assistant'; content: string; toolCalls?: ToolCall[] }
  | { role: 'tool'; content: string; toolCallId: string };

/** A function the model may call, as OpenAI's `tools` entries describe it. */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  parameters?: Record<string, unknown>;
  strict?: boolean;
}

/** Which tools the model may or must call. */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** The output format asked for: plain text, any JSON object, or JSON following a schema. */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown> | undefined; strict: boolean | undefined };

/** Sampling and tool options only the /v1 surface can set; each dialect passes on what it has. */
export interface GenerationOptions {
  topP?: number;
  stop?: string[];
  seed?: number;
  responseFormat?: ResponseFormat;
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  /** An end-user id for the upstream's abuse monitoring. */
  user?: string;
  /** OpenAI's `reasoning_effort`, passed on as is where the dialect has it. */
  reasoningEffort?: string;
}

/** The normalised request handed to a provider. */
export interface ProviderRequest {
  model: ModelConfig;
  /** Full conversation: system prompt first (if any), then session turns, history, the new user message. */
  messages: ProviderMessage[];
  temperature: number | undefined;
  maxTokens: number | undefined;
  deepThinking: boolean;
  language: string | undefined;
  /** Retrieved passages and search results, numbered as they will be cited. */
  sources: Source[];
  /** True when retrieval or search ran, even if it found nothing (the builtin then says so). */
  searched?: boolean;
  /** Options beyond the /api fields (tools, stop sequences, response format…). */
  options?: GenerationOptions;
}

/** Token counts as the upstream reported them. */
export interface ProviderUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Events a provider yields; the pipeline maps them onto ChatEvent. `finish` is always last. */
export type ProviderEvent =
  | { type: 'thinking'; text: string }
  | { type: 'delta'; text: string }
  | ({ type: 'tool_call' } & ToolCallFragment)
  | { type: 'finish'; reason: FinishReason; usage: ProviderUsage | undefined };

/**
 * A provider's reply: batches read with `for await`, or, where the provider can (the upstream
 * dialects), pushed to a taker with no promise per read (see `BatchStream` in upstream/frames.ts).
 */
export type ProviderStream = AsyncIterable<ProviderEvent[]> & {
  pump?(take: BatchTaker<ProviderEvent>): Promise<void>;
};

export interface ChatProvider {
  readonly name: ModelConfig['provider'];
  /** False when the dialect takes images only as inline data (`data:` URLs), not as http(s) URLs to fetch. */
  readonly remoteImages?: boolean;
  /**
   * Streams the reply as batches of events (all that one upstream read produced), ending with a
   * batch that holds `finish`. Throws UpstreamError (upstream_error / upstream_timeout) on failure.
   */
  stream(request: ProviderRequest, signal: CancelSignal): ProviderStream;
  /** A cheap read that shows the model's upstream is there (its model list); none for the built-in model. */
  probeRequest?(model: ModelConfig): { url: string; headers: Record<string, string> };
}
