/** GET /health: a real storage read plus the state of every configured provider. Never quota-counted. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';

interface ProviderCheck {
  provider: string;
  status: string;
  checked_at?: string;
  reason?: string;
  /** When a cool-down ends (status `cooling_down`). */
  until?: string;
}

/** Each configured model's upstream, as the last background probe found it (no call per request). */
function providerChecks(services: Services): Record<string, ProviderCheck> {
  const checks: Record<string, ProviderCheck> = {};
  for (const model of services.config.models) {
    if (model.provider !== 'builtin' && !model.baseUrl) {
      checks[model.id] = { provider: model.provider, status: 'misconfigured' };
      continue;
    }
    const coolingUntil = services.models.cooldowns.coolingUntil(model.id);
    if (coolingUntil !== undefined) {
      // Failed in a row: skipped for fallbacks until then (the probe may still reach the server).
      checks[model.id] = { provider: model.provider, status: 'cooling_down', until: new Date(coolingUntil).toISOString() };
      continue;
    }
    const probed = services.reachability.of(model.id);
    checks[model.id] = {
      provider: model.provider,
      status: probed?.status ?? 'ok',
      ...(probed?.checked_at ? { checked_at: probed.checked_at } : {}),
      ...(probed?.reason ? { reason: probed.reason } : {}),
    };
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
        // An upstream down (or misconfigured) leaves the node serving the others: degraded, still 200.
        const providersOk = Object.values(providers).every((check) => check.status === 'ok' || check.status === 'unknown');
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
