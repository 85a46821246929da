/** The provider for each configured model, built once at start-up. */
import type { Config, ModelConfig } from '../config/index.js';
import { ApiError } from '../errors.js';
import { AnthropicProvider } from './anthropic.js';
import { BuiltinProvider } from './builtin.js';
import { OllamaProvider } from './ollama.js';
import { OpenAiProvider } from './openai.js';
import type { ProbeTarget } from '../upstream/reachability.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import type { Clock } from '../domain/types.js';
import { ModelCooldowns } from './cooldown.js';
import type { ChatProvider } from './types.js';

/** A model with the provider that speaks its dialect. */
export interface ResolvedModel {
  model: ModelConfig;
  provider: ChatProvider;
}

export interface ProviderRegistry {
  /** The configured models, builtin first. */
  readonly models: readonly ModelConfig[];
  /** The cheap reads that show each upstream model's server is there (none for the built-in model). */
  probeTargets(): ProbeTarget[];
  /** Resolves a model id (or the default) to its config and provider; unknown ids are invalid_request. */
  resolve(modelId: string | undefined): ResolvedModel;
  /** The model's fallbacks, resolved, in the order they are tried. */
  fallbacksOf(model: ModelConfig): ResolvedModel[];
  /** Which models are cooling down after failing in a row (per node). */
  readonly cooldowns: ModelCooldowns;
}

/** Creates one provider per dialect and the model lookup over the config. */
export function createProviderRegistry(config: Readonly<Config>, upstream: UpstreamClient, clock?: Clock): ProviderRegistry {
  const providers: Record<ModelConfig['provider'], ChatProvider> = {
    openai: new OpenAiProvider(upstream),
    anthropic: new AnthropicProvider(upstream),
    ollama: new OllamaProvider(upstream),
    builtin: new BuiltinProvider(config.builtinDelayMs),
  };
  const byId = new Map(config.models.map((model) => [model.id, model]));
  // Resolved once: the config loader already refused fallbacks that name no model.
  const fallbacks = new Map(
    config.models.map((model) => [
      model.id,
      model.fallbacks.flatMap((id) => {
        const fallback = byId.get(id);
        return fallback ? [{ model: fallback, provider: providers[fallback.provider] }] : [];
      }),
    ]),
  );
  return {
    models: config.models,
    cooldowns: new ModelCooldowns(clock),
    fallbacksOf: (model) => fallbacks.get(model.id) ?? [],
    probeTargets: () =>
      config.models.flatMap((model) => {
        const request = providers[model.provider].probeRequest?.(model);
        return request ? [{ id: model.id, provider: model.provider, ...request }] : [];
      }),
    resolve(modelId) {
      const id = modelId ?? config.defaultModel;
      const model = byId.get(id);
      if (!model) {
        throw new ApiError('invalid_request', `Unknown model "${id}"; GET /api/models lists the available ones.`, {
          details: [{ path: 'model', message: `must be one of: ${[...byId.keys()].join(', ')}` }],
        });
      }
      return { model, provider: providers[model.provider] };
    },
  };
}
