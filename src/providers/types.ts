/**
 * What every upstream dialect (openai, anthropic, ollama, builtin) implements: turn one normalised
 * request into a stream of normalised events, honouring the abort signal.
 */
import type { FinishReason, Source } from '../domain/types.js';
import type { ModelConfig } from '../config/index.js';

export interface ProviderMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
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
  | { type: 'finish'; reason: FinishReason; usage: ProviderUsage | undefined };

export interface ChatProvider {
  readonly name: ModelConfig['provider'];
  /**
   * Streams the reply as batches of events (all that one upstream read produced), ending with a
   * batch that holds `finish`. Throws UpstreamError (upstream_error / upstream_timeout) on failure.
   */
  stream(request: ProviderRequest, signal: AbortSignal): AsyncIterable<ProviderEvent[]>;
  /** A cheap read that shows the model's upstream is there (its model list); none for the built-in model. */
  probeRequest?(model: ModelConfig): { url: string; headers: Record<string, string> };
}
