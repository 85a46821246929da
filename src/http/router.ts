/**
 * Path matching for our routes: static paths in a map, parameterised ones by segment. Knowing every
 * method of a path lets us answer 405 with `Allow` instead of 404.
 */
import type { Handler, Route } from './types.js';

interface RouteMatch {
  route: string;
  handler: Handler;
  params: Record<string, string>;
  maxBodyBytes: Route['maxBodyBytes'];
}

export type RouteLookup =
  | { kind: 'found'; match: RouteMatch }
  | { kind: 'method_not_allowed'; route: string; allow: string[] }
  | { kind: 'not_found' };

interface PathEntry {
  template: string;
  segments: string[];
  methods: Map<string, Route>;
  /** The answers of a static path per method, built once: a static route has no params to fill in. */
  found: Map<string, RouteLookup>;
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** Removes a trailing slash (except for `/`) so `/api/chat` and `/api/chat/` are one route. */
function normalisePath(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

export class Router {
  private readonly staticPaths = new Map<string, PathEntry>();
  private readonly dynamicPaths: PathEntry[] = [];

  constructor(routes: readonly Route[]) {
    for (const route of routes) this.add(route);
  }

  private add(route: Route): void {
    const { method } = route;
    const path = normalisePath(route.path);
    const segments = path.split('/');
    const isDynamic = segments.some((segment) => segment.startsWith(':'));
    let entry = isDynamic ? this.dynamicPaths.find((known) => known.template === path) : this.staticPaths.get(path);
    if (!entry) {
      entry = { template: path, segments, methods: new Map(), found: new Map() };
      if (isDynamic) this.dynamicPaths.push(entry);
      else this.staticPaths.set(path, entry);
    }
    if (entry.methods.has(method)) throw new Error(`route registered twice: ${method} ${path}`);
    entry.methods.set(method, route);
  }

  /** Finds the handler for a method and raw path. */
  lookup(method: string, rawPath: string): RouteLookup {
    const path = normalisePath(rawPath);
    let entry = this.staticPaths.get(path);
    let params = NO_PARAMS;
    if (entry) {
      const found = entry.found.get(method);
      if (found) return found;
    } else {
      const segments = path.split('/');
      for (const candidate of this.dynamicPaths) {
        const found = matchSegments(candidate.segments, segments);
        if (found) {
          entry = candidate;
          params = found;
          break;
        }
      }
    }
    if (!entry) return { kind: 'not_found' };
    // HEAD is GET without the body (the server drops it); a GET route answers both.
    const route = entry.methods.get(method) ?? (method === 'HEAD' ? entry.methods.get('GET') : undefined);
    if (!route) {
      const allow = [...entry.methods.keys()];
      if (allow.includes('GET')) allow.push('HEAD');
      return { kind: 'method_not_allowed', route: entry.template, allow };
    }
    const found: RouteLookup = {
      kind: 'found',
      match: { route: entry.template, handler: route.handler, params, maxBodyBytes: route.maxBodyBytes },
    };
    // Only a method that found a route gets here, so the map stays as small as the route table.
    if (params === NO_PARAMS) entry.found.set(method, found);
    return found;
  }
}

function matchSegments(template: string[], actual: string[]): Record<string, string> | undefined {
  if (template.length !== actual.length) return undefined;
  const params: Record<string, string> = {};
  for (let index = 0; index < template.length; index += 1) {
    const expected = template[index]!;
    const segment = actual[index]!;
    if (expected.startsWith(':')) {
      if (segment === '') return undefined;
      try {
        params[expected.slice(1)] = decodeURIComponent(segment);
      } catch {
        return undefined;
      }
    } else if (expected !== segment) {
      return undefined;
    }
  }
  return params;
}
