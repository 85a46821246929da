/** What the environment says: ports and paths, upstreams registered by variables, secrets by name. */
import { NO_FALLBACKS } from './defaults.js';
import type { ConfigFile } from './schema.js';
import { ConfigError, type ModelConfig } from './types.js';

export function intFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name}: expected an integer >= ${min}, got "${text}"`);
  return value;
}

export function secretFrom(env: NodeJS.ProcessEnv, name: string | undefined): string | undefined {
  if (!name) return undefined;
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

export function envModels(env: NodeJS.ProcessEnv): ModelConfig[] {
  const models: ModelConfig[] = [];
  if (env.OPENAI_API_KEY || env.OPENAI_BASE_URL) {
    const upstreamModel = env.OPENAI_MODEL || 'gpt-4o-mini';
    models.push({
      id: upstreamModel,
      provider: 'openai',
      baseUrl: env.OPENAI_BASE_URL || 'https://api.openai.com/v1',
      apiKey: secretFrom(env, 'OPENAI_API_KEY'),
      upstreamModel,
      thinkingBudget: 0,
      vision: false,
      ...NO_FALLBACKS,
    });
  }
  if (env.ANTHROPIC_API_KEY) {
    const upstreamModel = env.ANTHROPIC_MODEL || 'claude-sonnet-4-5';
    models.push({
      id: upstreamModel,
      provider: 'anthropic',
      baseUrl: env.ANTHROPIC_BASE_URL || 'https://api.anthropic.com',
      apiKey: env.ANTHROPIC_API_KEY,
      upstreamModel,
      thinkingBudget: 2048,
      vision: false,
      ...NO_FALLBACKS,
    });
  }
  if (env.OLLAMA_HOST) {
    const upstreamModel = env.OLLAMA_MODEL || 'llama3.2';
    const host = env.OLLAMA_HOST.startsWith('http') ? env.OLLAMA_HOST : `http://${env.OLLAMA_HOST}`;
    models.push({
      id: upstreamModel,
      provider: 'ollama',
      baseUrl: host,
      apiKey: undefined,
      upstreamModel,
      thinkingBudget: 0,
      vision: false,
      ...NO_FALLBACKS,
    });
  }
  return models;
}

export function envSearch(env: NodeJS.ProcessEnv): NonNullable<ConfigFile['search']> {
  if (env.SEARXNG_URL) return { provider: 'searxng', base_url: env.SEARXNG_URL };
  if (env.TAVILY_API_KEY) return { provider: 'tavily' };
  if (env.BRAVE_API_KEY) return { provider: 'brave' };
  return { provider: 'local' };
}
