/** The provider for each configured model, built once at start-up. */
import type { Config, ModelConfig } from '../config/index.js';
import { ApiError } from '../errors.js';
import { AnthropicProvider } from './anthropic.js';
import { BuiltinProvider } from './builtin.js';
import { OllamaProvider } from './ollama.js';
import { OpenAiProvider } from './openai.js';
import type { ProbeTarget } from '../upstream/reachability.js';
import type { UpstreamClient } from '../upstream/stream-call.js';
import type { ChatProvider } from './types.js';

export interface ProviderRegistry {
  /** The configured models, builtin first. */
  readonly models: readonly ModelConfig[];
  /** The cheap reads that show each upstream model's server is there (none for the built-in model). */
  probeTargets(): ProbeTarget[];
  /** Resolves a model id (or the default) to its config and provider; unknown ids are invalid_request. */
  resolve(modelId: string | undefined): { model: ModelConfig; provider: ChatProvider };
}

/** Creates one provider per dialect and the model lookup over the config. */
export function createProviderRegistry(config: Readonly<Config>, upstream: UpstreamClient): ProviderRegistry {
  const providers: Record<ModelConfig['provider'], ChatProvider> = {
    openai: new OpenAiProvider(upstream),
    anthropic: new AnthropicProvider(upstream),
    ollama: new OllamaProvider(upstream),
    builtin: new BuiltinProvider(config.builtinDelayMs),
  };
  const byId = new Map(config.models.map((model) => [model.id, model]));
  return {
    models: config.models,
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
