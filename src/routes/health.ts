/** GET /health: a real storage read plus the state of every configured provider. Never quota-counted. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';
import type { StorageHealth } from '../store/types.js';
import { NO_STORE } from './headers.js';

interface ProviderCheck {
  provider: string;
  status: string;
  checked_at?: string;
  reason?: string;
  /** When a cool-down ends (status `cooling_down`). */
  until?: string;
}

/**
 * The `providers` object of the reply, kept as JSON: every request reads each model's state (a
 * cool-down, the last background probe), but the text is rebuilt only when one of them changed,
 * which between probes is never. A probe or a cool-down replaces the values compared here.
 */
class ProviderSection {
  private readonly statuses: Array<string | undefined>;
  private readonly checkedAt: Array<string | undefined>;
  private readonly reasons: Array<string | undefined>;
  private readonly untils: Array<number | undefined>;
  private text: string | undefined;
  private allOk = true;

  constructor(private readonly services: Services) {
    const count = services.config.models.length;
    this.statuses = new Array(count).fill(undefined);
    this.checkedAt = new Array(count).fill(undefined);
    this.reasons = new Array(count).fill(undefined);
    this.untils = new Array(count).fill(undefined);
  }

  /** The section as JSON, and whether every provider is up (`ok`, or `unknown` before its first probe). */
  current(): { json: string; ok: boolean } {
    const { models } = this.services.config;
    let changed = this.text === undefined;
    for (let index = 0; index < models.length; index += 1) {
      const model = models[index]!;
      let status: string;
      let checkedAt: string | undefined;
      let reason: string | undefined;
      let until: number | undefined;
      if (model.provider !== 'builtin' && !model.baseUrl) {
        status = 'misconfigured';
      } else {
        until = this.services.models.cooldowns.coolingUntil(model.id);
        if (until !== undefined) {
          status = 'cooling_down';
        } else {
          const probed = this.services.reachability.of(model.id);
          status = probed?.status ?? 'ok';
          checkedAt = probed?.checked_at;
          reason = probed?.reason;
        }
      }
      if (
        status !== this.statuses[index] ||
        checkedAt !== this.checkedAt[index] ||
        reason !== this.reasons[index] ||
        until !== this.untils[index]
      ) {
        this.statuses[index] = status;
        this.checkedAt[index] = checkedAt;
        this.reasons[index] = reason;
        this.untils[index] = until;
        changed = true;
      }
    }
    if (changed) this.rebuild();
    return { json: this.text!, ok: this.allOk };
  }

  /** Serialises the recorded states (each model as current() just found it). */
  private rebuild(): void {
    const checks: Record<string, ProviderCheck> = {};
    this.services.config.models.forEach((model, index) => {
      const status = this.statuses[index] ?? 'ok';
      const until = this.untils[index];
      const checkedAt = this.checkedAt[index];
      const reason = this.reasons[index];
      if (status === 'misconfigured') checks[model.id] = { provider: model.provider, status };
      // Failed in a row: skipped for fallbacks until then (the probe may still reach the server).
      else if (until !== undefined) checks[model.id] = { provider: model.provider, status, until: new Date(until).toISOString() };
      else
        checks[model.id] = {
          provider: model.provider,
          status,
          ...(checkedAt ? { checked_at: checkedAt } : {}),
          ...(reason ? { reason } : {}),
        };
    });
    this.text = JSON.stringify(checks);
    this.allOk = Object.values(checks).every((check) => check.status === 'ok' || check.status === 'unknown');
  }
}

// storageJson writes these fields and no others: a field added to StorageHealth fails to compile here.
type UnwrittenStorageField = Exclude<keyof StorageHealth, 'ok' | 'engine' | 'latency_ms' | 'detail'>;
const everyStorageFieldWritten: [UnwrittenStorageField] extends [never] ? true : never = true;
void everyStorageFieldWritten;

let lastEngine = '';
let lastEngineJson = '""';

/**
 * The storage check as JSON, the bytes JSON.stringify gives for the object (its keys in the order
 * both engines build it), without JSON.stringify's generic walk, which cost about 0.5 µs a request.
 */
function storageJson(health: StorageHealth): string {
  if (health.engine !== lastEngine) {
    lastEngine = health.engine;
    lastEngineJson = JSON.stringify(health.engine);
  }
  const latency = Number.isFinite(health.latency_ms) ? health.latency_ms : 'null';
  const detail = health.detail === undefined ? '' : `,"detail":${JSON.stringify(health.detail)}`;
  return `{"ok":${health.ok},"engine":${lastEngineJson},"latency_ms":${latency}${detail}}`;
}

// Frozen constants: the server writes a frozen header set with Content-Type in one call.
const NOT_SERVING: Readonly<Record<string, string>> = Object.freeze({ ...NO_STORE, 'Retry-After': '5' });

export function healthRoutes(services: Services): Route[] {
  const providers = new ProviderSection(services);
  // The reply is spliced from fixed text and the fields that change; the key order is the one
  // docs/api.md shows: status, version, uptime_s, checks {storage, providers, images, search}.
  const afterStatus = `","version":${JSON.stringify(services.config.version)},"uptime_s":`;
  let imagesName: string | undefined;
  let searchName: string | undefined;
  let capabilities = '';
  return [
    {
      method: 'GET',
      path: '/health',
      handler: async (context) => {
        const storage = await services.storage.check();
        const section = providers.current();
        if (services.images.name !== imagesName || services.search.name !== searchName) {
          imagesName = services.images.name;
          searchName = services.search.name;
          capabilities = `,"images":${JSON.stringify({ provider: imagesName })},"search":${JSON.stringify({ provider: searchName })}}}`;
        }
        // An upstream down (or misconfigured) leaves the node serving the others: degraded, still 200.
        // Storage that cannot be read means the node cannot serve; a provider down is only degraded.
        const draining = services.lifecycle.draining;
        const status = draining ? 'draining' : !storage.ok ? 'unavailable' : section.ok ? 'ok' : 'degraded';
        const uptime = Math.round((performance.now() - services.startedAt) / 1000);
        const body = `{"status":"${status}${afterStatus}${uptime},"checks":{"storage":${storageJson(storage)},"providers":${section.json}${capabilities}`;
        const serving = storage.ok && !draining;
        context.send(serving ? 200 : 503, 'application/json', body, serving ? NO_STORE : NOT_SERVING);
      },
    },
  ];
}
