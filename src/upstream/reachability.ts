/**
 * Whether each configured upstream can be reached, known without spending a call per health
 * request: a background probe (a cheap read such as the model list) through the JSON transport,
 * with its timeout and size bound, at most every `intervalMs`. /health reports the last result.
 */
import { callJson } from './json-call.js';
import type { UpstreamObserver } from './observer.js';

/** One upstream to probe: a model id, the provider's name, and the cheap request to send. */
export interface ProbeTarget {
  id: string;
  provider: string;
  url: string;
  headers: Record<string, string>;
}

/** What the last probe of one upstream found. */
export interface Reachability {
  status: 'ok' | 'unreachable' | 'unknown';
  /** ISO 8601 time of the last probe. */
  checked_at?: string;
  /** Why it is unreachable (a status or an error code, never the upstream's words). */
  reason?: string;
}

/** Probes a set of upstreams in the background and remembers the last answer of each. */
export class ReachabilityProbe {
  private readonly state = new Map<string, Reachability>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly targets: readonly ProbeTarget[],
    private readonly options: { intervalMs: number; timeoutMs: number; maxBytes: number; observer?: UpstreamObserver | undefined },
  ) {
    for (const target of targets) this.state.set(target.id, { status: 'unknown' });
  }

  /** Starts probing every interval (nothing to do without upstreams); until the first probe the state is `unknown`. */
  start(): void {
    if (this.targets.length === 0 || this.timer) return;
    this.timer = setInterval(() => {
      this.running ??= this.probeAll();
    }, this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops probing and waits for a probe in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** The last result for a model id (undefined for a model that is not probed, such as the built-in one). */
  of(id: string): Reachability | undefined {
    return this.state.get(id);
  }

  private async probeAll(): Promise<void> {
    try {
      await Promise.all(this.targets.map((target) => this.probe(target)));
    } finally {
      this.running = undefined;
    }
  }

  private async probe(target: ProbeTarget): Promise<void> {
    const checked_at = new Date().toISOString();
    try {
      const reply = await callJson({
        subject: `The ${target.provider} upstream`,
        provider: target.provider,
        url: target.url,
        method: 'GET',
        headers: target.headers,
        timeoutMs: this.options.timeoutMs,
        maxBytes: this.options.maxBytes,
        ...(this.options.observer ? { observer: this.options.observer } : {}),
      });
      // Any answer below 500 means the server is there (a 401 is a key problem, reported apart).
      if (reply.status >= 500) this.state.set(target.id, { status: 'unreachable', checked_at, reason: `HTTP ${reply.status}` });
      else if (reply.status === 401 || reply.status === 403)
        this.state.set(target.id, { status: 'unreachable', checked_at, reason: `credentials refused (HTTP ${reply.status})` });
      else this.state.set(target.id, { status: 'ok', checked_at });
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      this.state.set(target.id, { status: 'unreachable', checked_at, reason: typeof code === 'string' ? code : 'unreachable' });
    }
  }
}
