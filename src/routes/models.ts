/** GET /api/models: the configured models with their provider (never a key or a base URL's secrets). */
import type { Route } from '../http/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Services } from '../services.js';
import { identify } from './admit.js';

/** The models route. */
export function modelsRoutes(services: Services, registry: ProviderRegistry): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/models',
      handler: async (context) => {
        await identify(services, context);
        context.json(200, {
          default_model: services.config.defaultModel,
          models: registry.models.map((model) => ({
            id: model.id,
            provider: model.provider,
            upstream_model: model.upstreamModel,
            default: model.id === services.config.defaultModel,
          })),
        });
      },
    },
  ];
}
