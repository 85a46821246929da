/**
 * Turning what search upstreams send into what the answer can cite: plain-text snippets of a
 * bounded length, URLs compared by what they point at, queries an upstream accepts.
 */
import { Parser } from 'htmlparser2';
import { SNIPPET_MAX_CHARS } from '../domain/types.js';
import type { SearchResult } from './types.js';

export { SNIPPET_MAX_CHARS };

/** Brave refuses queries over 400 characters or 50 words; the others are looser, so one cap fits all. */
const QUERY_MAX_CHARS = 400;
const QUERY_MAX_WORDS = 50;

// Elements whose text is never part of what a reader sees.
const HIDDEN_ELEMENTS = new Set(['script', 'style', 'noscript', 'template']);
// Block elements: their boundaries become spaces so `a</p><p>b` does not glue words together.
const BLOCK_ELEMENTS = new Set([
  'p',
  'div',
  'br',
  'li',
  'ul',
  'ol',
  'tr',
  'td',
  'th',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'section',
  'article',
  'blockquote',
  'pre',
]);

/** Text content of an HTML fragment with entities decoded and hidden elements dropped. */
function htmlToText(html: string): string {
  if (!/[<&]/.test(html)) return html;
  const parts: string[] = [];
  let hiddenDepth = 0;
  const parser = new Parser(
    {
      onopentagname(name) {
        if (HIDDEN_ELEMENTS.has(name)) hiddenDepth += 1;
        else if (BLOCK_ELEMENTS.has(name)) parts.push(' ');
      },
      onclosetag(name) {
        if (HIDDEN_ELEMENTS.has(name)) hiddenDepth = Math.max(0, hiddenDepth - 1);
        else if (BLOCK_ELEMENTS.has(name)) parts.push(' ');
      },
      ontext(text) {
        if (hiddenDepth === 0) parts.push(text);
      },
    },
    { decodeEntities: true },
  );
  parser.write(html);
  parser.end();
  return parts.join('');
}

/** Collapses every run of whitespace (including newlines and NBSP) to one space and trims. */
export function collapseWhitespace(text: string): string {
  return text.replace(/\s+/gu, ' ').trim();
}

/** Cuts text to at most `max` characters at a word boundary, marking the cut with an ellipsis. */
export function capText(text: string, max: number): string {
  if (text.length <= max) return text;
  const room = text.slice(0, max - 1);
  const lastSpace = room.lastIndexOf(' ');
  // A single very long token (a URL, CJK text without spaces) is cut mid-token rather than dropped.
  const cut = lastSpace > max * 0.6 ? room.slice(0, lastSpace) : room;
  return `${cut.replace(/[\s.,;:!?-]+$/u, '')}…`;
}

/** A snippet as sources carry it: HTML stripped, whitespace collapsed, length capped. */
export function cleanSnippet(raw: string, max = SNIPPET_MAX_CHARS): string {
  return capText(collapseWhitespace(htmlToText(raw)), max);
}

/** A title as sources carry it: like a snippet but shorter. */
export function cleanTitle(raw: string): string {
  return capText(collapseWhitespace(htmlToText(raw)), 200);
}

/**
 * The query sent upstream and reported in `search.query`: one line, at most 400 characters and
 * 50 words (Brave's documented limits), cut at a word boundary.
 */
export function toSearchQuery(text: string): string {
  const words = collapseWhitespace(text).split(' ');
  const limited = words.slice(0, QUERY_MAX_WORDS).join(' ');
  if (limited.length <= QUERY_MAX_CHARS) return limited;
  const room = limited.slice(0, QUERY_MAX_CHARS);
  const lastSpace = room.lastIndexOf(' ');
  return lastSpace > 0 ? room.slice(0, lastSpace) : room;
}

/**
 * The key two results are compared by: lower-case scheme and host, default port, fragment,
 * trailing slash and tracking parameters (utm_*, and the common click ids) dropped, remaining
 * parameters sorted. Returns undefined for anything that is not an absolute http(s) URL.
 */
export function normaliseUrl(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  url.hash = '';
  // WHATWG URL already lower-cases the host and drops default ports; strip a leading www. so
  // http://www.x.org/a and https://x.org/a count as one page.
  const host = url.hostname.replace(/^www\./, '');
  const kept = [...url.searchParams].filter(([name]) => !isTrackingParam(name));
  kept.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const query = new URLSearchParams(kept).toString();
  const path = url.pathname.replace(/\/+$/, '');
  return `${host}${url.port ? `:${url.port}` : ''}${path}${query ? `?${query}` : ''}`;
}

function isTrackingParam(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('utm_') || lower === 'gclid' || lower === 'fbclid' || lower === 'msclkid';
}

/**
 * Keeps the first result for each normalised URL (upstreams rank best first), drops results
 * without an http(s) URL or without any text, and stops at `max`.
 */
export function dedupeResults(results: Iterable<SearchResult>, max: number): SearchResult[] {
  const seen = new Set<string>();
  const kept: SearchResult[] = [];
  for (const result of results) {
    if (kept.length >= max) break;
    if (!result.title && !result.snippet) continue;
    if (result.url === undefined) {
      kept.push(result);
      continue;
    }
    const key = normaliseUrl(result.url);
    if (key === undefined || seen.has(key)) continue;
    seen.add(key);
    // An untitled hit is still citable; its host is the most honest title it has.
    kept.push(result.title ? result : { ...result, title: new URL(result.url).hostname });
  }
  return kept;
}
