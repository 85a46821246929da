/**
 * GET /dashboard and its assets: the caller's web page (plain HTML, CSS and browser JS under
 * web/dashboard/, no build step). Files are read once at start-up, fingerprinted with a content
 * hash and served from memory with ETags, so a request never touches the disk.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
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
 * Third-party browser code the page loads, served from the installed npm package (a dependency, so
 * it is there after `npm ci` in a clone and after installing the packed tarball) under a local name.
 */
const VENDORED: ReadonlyArray<{ name: string; specifier: string }> = [
  { name: 'uplot.js', specifier: 'uplot/dist/uPlot.esm.js' },
  { name: 'uplot.css', specifier: 'uplot/dist/uPlot.min.css' },
];

/** A release directory name or a file's fingerprint: a 16-character content hash. */
const RELEASE_PATTERN = /^[A-Za-z0-9_-]{16}$/;

interface StaticFile {
  body: Buffer;
  contentType: string;
  etag: string;
  /** Short content hash of this file. */
  version: string;
}

interface DashboardFiles {
  page: StaticFile;
  assets: Map<string, StaticFile>;
  /** Hash over every asset: the directory the page loads them from. */
  release: string;
}

function contentTypeOf(name: string): string {
  const extension = name.slice(name.lastIndexOf('.'));
  const type = CONTENT_TYPES[extension];
  if (!type) throw new Error(`dashboard asset ${name} has no known content type`);
  return type;
}

function contentHash(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('base64url').slice(0, 16);
}

function staticFile(name: string, body: Buffer): StaticFile {
  const version = contentHash(body);
  return { body, contentType: contentTypeOf(name), etag: `"${version}"`, version };
}

/**
 * Reads the page and its assets: every stylesheet, icon and ES module beside index.html, plus the
 * vendored chart library. The assets are served under one directory named by a hash over all of
 * them, so the modules' relative imports (`./state.js`) land on fingerprinted, immutable URLs
 * without a bundler or an import map, and any changed file moves the whole graph to a new URL.
 */
function loadDashboardFiles(root: URL = WEB_ROOT): DashboardFiles {
  const assets = new Map<string, StaticFile>();
  const names = readdirSync(root)
    .filter((name) => name !== 'index.html' && /^[a-z-]+\.(js|css|svg)$/.test(name))
    .sort();
  for (const name of names) assets.set(name, staticFile(name, readFileSync(new URL(name, root))));
  const resolve = createRequire(import.meta.url).resolve;
  for (const { name, specifier } of VENDORED) assets.set(name, staticFile(name, readFileSync(resolve(specifier))));
  const release = contentHash([...assets].map(([name, file]) => `${name}:${file.version}`).join('\n'));
  let html = readFileSync(new URL('index.html', root), 'utf8');
  for (const name of assets.keys()) html = html.replaceAll(`/dashboard/assets/${name}"`, `/dashboard/assets/${release}/${name}"`);
  return { page: staticFile('index.html', Buffer.from(html, 'utf8')), assets, release };
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

/** The dashboard route group: the page, its release directory of assets, and unversioned asset URLs. */
export function dashboardRoutes(_services: Services): Route[] {
  const { page, assets, release } = loadDashboardFiles();
  const asset = (name: string | undefined): StaticFile => {
    const file = assets.get(name ?? '');
    if (!file) throw new ApiError('not_found', 'No such dashboard asset.');
    return file;
  };
  return [
    {
      method: 'GET',
      path: '/dashboard',
      // The page itself is revalidated every time (cheap with the ETag) so a deploy shows at once.
      handler: (context) => serve(context, page, 'no-cache'),
    },
    {
      method: 'GET',
      path: '/dashboard/assets/:release/:name',
      handler: (context) => {
        const { release: requested, name } = context.request.params;
        if (!RELEASE_PATTERN.test(requested ?? '')) throw new ApiError('not_found', 'No such dashboard asset.');
        const file = asset(name);
        // Only the current release may be cached for good. A page from before a deploy still gets
        // the current file, revalidated, rather than a broken import.
        serve(context, file, requested === release ? 'public, max-age=31536000, immutable' : 'no-cache');
      },
    },
    {
      method: 'GET',
      path: '/dashboard/assets/:name',
      handler: (context) => serve(context, asset(context.request.params.name), 'no-cache'),
    },
  ];
}
