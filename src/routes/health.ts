/** GET /health: a real storage read plus the state of every configured provider. Never quota-counted. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';

/** Health of each configured model's provider, as far as it can be known without spending a call. */
function providerChecks(services: Services): Record<string, { provider: string; status: string }> {
  const checks: Record<string, { provider: string; status: string }> = {};
  for (const model of services.config.models) {
    const ready = model.provider === 'builtin' || Boolean(model.baseUrl);
    checks[model.id] = { provider: model.provider, status: ready ? 'ok' : 'misconfigured' };
  }
  return checks;
}

const NO_CACHE = { 'Cache-Control': 'no-store' };

export function healthRoutes(services: Services): Route[] {
  return [
    {
      method: 'GET',
      path: '/health',
      handler: async (context) => {
        const storage = await services.storage.check();
        const providers = providerChecks(services);
        const capabilities = {
          images: { provider: services.images.name },
          search: { provider: services.search.name },
        };
        const providersOk = Object.values(providers).some((check) => check.status === 'ok');
        // Storage that cannot be read means the node cannot serve; a provider down is only degraded.
        const status = services.lifecycle.draining ? 'draining' : !storage.ok ? 'unavailable' : providersOk ? 'ok' : 'degraded';
        const body = {
          status,
          version: services.config.version,
          uptime_s: Math.round((performance.now() - services.startedAt) / 1000),
          checks: { storage, providers, ...capabilities },
        };
        const serving = storage.ok && !services.lifecycle.draining;
        context.json(serving ? 200 : 503, body, serving ? NO_CACHE : { ...NO_CACHE, 'Retry-After': '5' });
      },
    },
  ];
}
