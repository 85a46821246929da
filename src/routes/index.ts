/** Every route group of the service, in one list. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';
import { healthRoutes } from './health.js';
import { metricsRoutes } from './metrics.js';
import { notImplementedRoutes } from './not-implemented.js';

export function buildRoutes(services: Services): Route[] {
  const routes: Route[] = [...healthRoutes(services), ...metricsRoutes(services)];
  return [...routes, ...notImplementedRoutes(routes)];
}
