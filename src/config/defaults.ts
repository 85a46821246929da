/** Built-in defaults: the plans, the upstream base URLs and key variables, the package version. */
import { readFileSync } from 'node:fs';
import type { Config, ModelConfig, PlanConfig } from './types.js';

export const DEFAULT_PLANS: Record<string, PlanConfig> = {
  free: { quota: 50, window_seconds: 86_400 },
  pro: { quota: 2000, window_seconds: 86_400 },
};

/**
 * MiB of decoded session turns each process keeps by default (`session_cache_mb`): the kept turns
 * of about a thousand sessions of 200 short turns. Sessions in use at once beyond that are read
 * from storage.
 */
export const SESSION_CACHE_MB = 48;

export const DEFAULT_BASE_URL: Record<ModelConfig['provider'], string | undefined> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  ollama: 'http://127.0.0.1:11434',
  builtin: undefined,
};

export function defaultSearchUrl(provider: Config['search']['provider']): string | undefined {
  if (provider === 'brave') return 'https://api.search.brave.com';
  if (provider === 'tavily') return 'https://api.tavily.com';
  return undefined;
}

export function defaultSearchKeyEnv(provider: Config['search']['provider']): string | undefined {
  if (provider === 'brave') return 'BRAVE_API_KEY';
  if (provider === 'tavily') return 'TAVILY_API_KEY';
  return undefined;
}

let cachedVersion: string | undefined;
export function packageVersion(): string {
  if (cachedVersion) return cachedVersion;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
    cachedVersion = pkg.version ?? '0.0.0';
  } catch {
    cachedVersion = '0.0.0';
  }
  return cachedVersion;
}

/**
 * Streams one process can hold: a proxied stream holds two sockets (client and upstream), so half
 * the process's open-file limit, less a margin for storage, listeners and logs.
 */
export function defaultMaxStreams(): number {
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8');
    const soft = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1]);
    if (Number.isFinite(soft) && soft > 256) return Math.floor((soft - 128) / 2);
  } catch {
    // Not Linux: fall through to a conservative default.
  }
  return 4096;
}

/** A model's fallback defaults: none, and a cool-down of 30 s after 3 upstream failures in a row. */
export const NO_FALLBACKS = { fallbacks: [] as readonly string[], cooldownAfter: 3, cooldownSeconds: 30 };
