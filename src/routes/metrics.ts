/** GET /metrics: the Prometheus text exposition of the one registry. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';

export function metricsRoutes(services: Services): Route[] {
  return [
    {
      method: 'GET',
      path: '/metrics',
      handler: async (context) => {
        const text = await services.metrics.registry.metrics();
        context.send(200, services.metrics.registry.contentType, text, { 'Cache-Control': 'no-store' });
      },
    },
  ];
}
