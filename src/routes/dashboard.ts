/**
 * GET /dashboard and its assets: the caller's web page (plain HTML, CSS and browser JS under
 * web/dashboard/, no build step). Files are read once at start-up, fingerprinted with a content
 * hash and served from memory with ETags, so a request never touches the disk.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ApiError } from '../errors.js';
import type { Headers, HttpContext, Route } from '../http/types.js';
import type { Services } from '../services.js';

/** Where the static files live, from dist/src/routes/ (compiled) back to the repository root. */
const WEB_ROOT = new URL('../../../web/dashboard/', import.meta.url);

/**
 * The page may load only its own script and stylesheet and talk only to this origin. No inline
 * script or style, no framing, no plugins, and Trusted Types so no string can become markup.
 */
const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
  "require-trusted-types-for 'script'",
  'trusted-types',
].join('; ');

const PAGE_HEADERS: Headers = {
  'Content-Security-Policy': DASHBOARD_CSP,
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), clipboard-write=(self)',
};

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The assets the page references: the stylesheet, the icon and the ES modules of the script (one
 * per view, imported by `dashboard.js` with relative URLs). Anything else under /dashboard/assets/
 * is 404.
 */
const ASSET_NAMES = [
  'dashboard.css',
  'icon.svg',
  'dashboard.js',
  'state.js',
  'errors.js',
  'feedback.js',
  'api.js',
  'sse.js',
  'dom.js',
  'secrets.js',
  'signin.js',
  'quota-view.js',
  'keys-view.js',
  'sessions-view.js',
  'playground-view.js',
  'admin-view.js',
] as const;

interface StaticFile {
  body: Buffer;
  contentType: string;
  etag: string;
  /** Short content hash used as the `?v=` fingerprint in asset URLs. */
  version: string;
}

function contentTypeOf(name: string): string {
  const extension = name.slice(name.lastIndexOf('.'));
  const type = CONTENT_TYPES[extension];
  if (!type) throw new Error(`dashboard asset ${name} has no known content type`);
  return type;
}

function staticFile(name: string, body: Buffer): StaticFile {
  const version = createHash('sha256').update(body).digest('base64url').slice(0, 16);
  return { body, contentType: contentTypeOf(name), etag: `"${version}"`, version };
}

/** Reads the page and its assets; asset URLs in the page get their content hash appended. */
function loadDashboardFiles(root: URL = WEB_ROOT): { page: StaticFile; assets: Map<string, StaticFile> } {
  const assets = new Map<string, StaticFile>();
  for (const name of ASSET_NAMES) assets.set(name, staticFile(name, readFileSync(new URL(name, root))));
  let html = readFileSync(new URL('index.html', root), 'utf8');
  // A changed asset gets a new URL, so the long-lived cache entry of the old one is never reused.
  for (const [name, file] of assets) html = html.replaceAll(`/dashboard/assets/${name}"`, `/dashboard/assets/${name}?v=${file.version}"`);
  return { page: staticFile('index.html', Buffer.from(html, 'utf8')), assets };
}

/** True when the request's If-None-Match names the file's current ETag. */
function notModified(context: HttpContext, file: StaticFile): boolean {
  const header = context.request.headers['if-none-match'];
  if (!header) return false;
  return header.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed === file.etag || trimmed === `W/${file.etag}`;
  });
}

function serve(context: HttpContext, file: StaticFile, cacheControl: string): void {
  const headers: Headers = { ...PAGE_HEADERS, 'Cache-Control': cacheControl, ETag: file.etag };
  if (notModified(context, file)) {
    context.send(304, file.contentType, '', headers);
    return;
  }
  context.send(200, file.contentType, file.body, headers);
}

export function dashboardRoutes(_services: Services): Route[] {
  const { page, assets } = loadDashboardFiles();
  return [
    {
      method: 'GET',
      path: '/dashboard',
      // The page itself is revalidated every time (cheap with the ETag) so a deploy shows at once.
      handler: (context) => serve(context, page, 'no-cache'),
    },
    {
      method: 'GET',
      path: '/dashboard/assets/:name',
      handler: (context) => {
        const file = assets.get(context.request.params.name ?? '');
        if (!file) throw new ApiError('not_found', 'No such dashboard asset.');
        // Only the fingerprinted URL may be cached for good; a bare or stale one must revalidate.
        const fingerprinted = context.request.query.get('v') === file.version;
        serve(context, file, fingerprinted ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    },
  ];
}
