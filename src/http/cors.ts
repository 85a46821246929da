/**
 * CORS for browser apps on other origins: only the configured origins, only on the API paths.
 * A listed origin gets its own origin back (never `*`, since requests carry a bearer key), the
 * RateLimit and request-id headers exposed, and preflights answered with the route's methods.
 */

/** The configured origins (`cors.origins`); empty: no cross-origin access. */
export interface CorsPolicy {
  origins: ReadonlySet<string>;
}

const API_PATH = /^\/(?:api|v1)(?:\/|$)/;
const ALLOWED_HEADERS = 'authorization, content-type, last-event-id, accept';
const EXPOSED_HEADERS =
  'RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, RateLimit, Retry-After, X-Request-Id, WWW-Authenticate';
/** How long a browser may reuse a preflight answer. */
const PREFLIGHT_MAX_AGE_S = '600';

/** The origin to echo for a request, when it is listed and the path is an API path. */
export function allowedOrigin(policy: CorsPolicy | undefined, path: string, origin: string | undefined): string | undefined {
  if (!policy || origin === undefined || !API_PATH.test(path)) return undefined;
  return policy.origins.has(origin) ? origin : undefined;
}

/** Headers every reply to an allowed cross-origin request carries. */
export function corsHeaders(origin: string): Record<string, string> {
  return { 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSED_HEADERS, Vary: 'Origin' };
}

/** Headers of a preflight answer for a path whose methods are `methods`. */
export function preflightHeaders(origin: string, methods: readonly string[]): Record<string, string> {
  return {
    'Access-Control-Allow-Origin': origin,
    'Access-Control-Allow-Methods': methods.join(', '),
    'Access-Control-Allow-Headers': ALLOWED_HEADERS,
    'Access-Control-Max-Age': PREFLIGHT_MAX_AGE_S,
    Vary: 'Origin',
  };
}
