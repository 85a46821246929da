/**
 * Builds the one SearchProvider the server uses from `config.search`; its upstream calls report
 * to the upstream layer's metrics seam.
 */
import { ConfigError, type Config } from '../config/index.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Retriever } from '../rag/types.js';
import { recordUpstreamCalls } from '../upstream/observer.js';
import { BraveSearch } from './brave.js';
import { LocalSearch } from './local.js';
import { SearxngSearch } from './searxng.js';
import { TavilySearch } from './tavily.js';
import type { SearchProvider } from './types.js';

export interface SearchDeps {
  metrics: Metrics;
  logger: Logger;
  /** The knowledge base, searched by the offline default provider. */
  retriever: Retriever;
}

/** The configured provider; a web provider without its base URL or key stops start-up with a ConfigError. */
export function createSearchProvider(config: Config['search'], deps: SearchDeps): SearchProvider {
  const upstream = { observer: recordUpstreamCalls(deps.metrics, deps.logger), timeoutMs: config.timeoutMs };
  let provider: SearchProvider;
  switch (config.provider) {
    case 'local':
      provider = new LocalSearch(deps.retriever);
      break;
    case 'searxng':
      provider = new SearxngSearch({ baseUrl: required(config.baseUrl, 'search.base_url', 'searxng'), apiKey: config.apiKey }, upstream);
      break;
    case 'brave':
      provider = new BraveSearch(
        {
          baseUrl: required(config.baseUrl, 'search.base_url', 'brave'),
          apiKey: required(config.apiKey, 'search.api_key_env (default BRAVE_API_KEY)', 'brave'),
        },
        upstream,
      );
      break;
    case 'tavily':
      provider = new TavilySearch(
        {
          baseUrl: required(config.baseUrl, 'search.base_url', 'tavily'),
          apiKey: required(config.apiKey, 'search.api_key_env (default TAVILY_API_KEY)', 'tavily'),
        },
        upstream,
      );
      break;
  }
  return provider;
}

function required(value: string | undefined, key: string, provider: string): string {
  if (!value) throw new ConfigError(`${key}: required for the ${provider} search provider`);
  return value;
}
