/** Every route group of the service, in one list. */
import type { Route } from '../http/types.js';
import type { Services } from '../services.js';
import { dashboardRoutes } from './dashboard.js';
import { adminRoutes } from './admin.js';
import { chatRoutes } from './chat.js';
import { ChatReplies } from './chat-replies.js';
import { modelsRoutes } from './models.js';
import { openApiRoutes } from './openapi.js';
import { healthRoutes } from './health.js';
import { imageRoutes } from './images.js';
import { keyRoutes } from './keys.js';
import { metricsRoutes } from './metrics.js';
import { quotaRoutes } from './quota.js';
import { ragRoutes } from './rag.js';
import { sessionRoutes } from './sessions.js';
import { usageRoutes } from './usage.js';
import { resumableRoutes } from './resumable.js';
import { v1Routes } from './v1.js';

export function buildRoutes(services: Services): Route[] {
  const providers = services.models;
  // One pipeline behind every chat-like route, /api and /v1 alike.
  const replies = new ChatReplies(services);
  const routes = [
    ...healthRoutes(services),
    ...metricsRoutes(services),
    ...chatRoutes(services, providers, replies),
    ...modelsRoutes(services, providers),
    ...v1Routes(services, providers, replies),
    ...imageRoutes(services),
    ...sessionRoutes(services),
    ...quotaRoutes(services),
    ...usageRoutes(services),
    ...resumableRoutes(services),
    ...keyRoutes(services),
    ...adminRoutes(services),
    ...ragRoutes(services),
    ...dashboardRoutes(services),
  ];
  // Last: the OpenAPI document describes every route above (and itself).
  return [...routes, ...openApiRoutes(services, routes)];
}
