import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Parser } from 'htmlparser2';
import { bootServer, type TestServer } from './helpers/server.js';

interface ParsedPage {
  scripts: Array<{ src: string | undefined; type: string | undefined; body: string }>;
  stylesheets: string[];
  inlineStyles: number;
  eventHandlerAttributes: string[];
  styleAttributes: number;
  /** Form controls that need a label: id → has a <label for>, wraps in a label, or aria-label. */
  unlabelled: string[];
}

/** Walks the page with a real HTML parser and records what the CSP and accessibility rules care about. */
function parsePage(html: string): ParsedPage {
  const page: ParsedPage = {
    scripts: [],
    stylesheets: [],
    inlineStyles: 0,
    eventHandlerAttributes: [],
    styleAttributes: 0,
    unlabelled: [],
  };
  const labelFor = new Set<string>();
  const controls: Array<{ id: string | undefined; wrapped: boolean; ariaLabel: boolean }> = [];
  let labelDepth = 0;
  let currentScript: ParsedPage['scripts'][number] | undefined;
  let inStyle = false;
  const parser = new Parser({
    onopentag(name, attributes) {
      for (const attribute of Object.keys(attributes))
        if (attribute.startsWith('on')) page.eventHandlerAttributes.push(`${name}[${attribute}]`);
      if ('style' in attributes) page.styleAttributes += 1;
      if (name === 'script') currentScript = { src: attributes.src, type: attributes.type, body: '' };
      if (name === 'style') inStyle = true;
      if (name === 'link' && attributes.rel === 'stylesheet' && attributes.href) page.stylesheets.push(attributes.href);
      if (name === 'label') {
        labelDepth += 1;
        if (attributes.for) labelFor.add(attributes.for);
      }
      const isControl = (name === 'input' && attributes.type !== 'hidden') || name === 'textarea' || name === 'select';
      if (isControl) controls.push({ id: attributes.id, wrapped: labelDepth > 0, ariaLabel: Boolean(attributes['aria-label']) });
    },
    ontext(text) {
      if (currentScript) currentScript.body += text;
      if (inStyle && text.trim()) page.inlineStyles += 1;
    },
    onclosetag(name) {
      if (name === 'script' && currentScript) {
        page.scripts.push(currentScript);
        currentScript = undefined;
      }
      if (name === 'style') inStyle = false;
      if (name === 'label') labelDepth -= 1;
    },
  });
  parser.write(html);
  parser.end();
  for (const control of controls) {
    const labelled = control.wrapped || control.ariaLabel || (control.id !== undefined && labelFor.has(control.id));
    if (!labelled) page.unlabelled.push(control.id ?? '(no id)');
  }
  return page;
}

describe('the dashboard static files', () => {
  let server: TestServer;
  let html: string;
  let pageResponse: Response;

  before(async () => {
    server = await bootServer();
    pageResponse = await server.fetch('/dashboard');
    html = await pageResponse.text();
  });
  after(() => server.close());

  it('serves the page as UTF-8 HTML with a strict Content-Security-Policy and revalidation caching', () => {
    assert.equal(pageResponse.status, 200);
    assert.equal(pageResponse.headers.get('content-type'), 'text/html; charset=utf-8');
    const csp = pageResponse.headers.get('content-security-policy') ?? '';
    const directives = new Map(
      csp.split(';').map((part) => {
        const [name, ...values] = part.trim().split(/\s+/);
        return [name!, values.join(' ')] as const;
      }),
    );
    assert.equal(directives.get('default-src'), "'none'");
    assert.equal(directives.get('script-src'), "'self'");
    assert.equal(directives.get('style-src'), "'self'");
    assert.equal(directives.get('connect-src'), "'self'");
    assert.equal(directives.get('frame-ancestors'), "'none'");
    assert.equal(directives.get('form-action'), "'none'");
    assert.equal(directives.get('require-trusted-types-for'), "'script'");
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
    assert.equal(pageResponse.headers.get('cache-control'), 'no-cache');
    assert.match(pageResponse.headers.get('etag') ?? '', /^"[A-Za-z0-9_-]{16}"$/);
    assert.equal(pageResponse.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(pageResponse.headers.get('x-frame-options'), 'DENY');
    assert.equal(pageResponse.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(pageResponse.headers.get('set-cookie'), null);
  });

  it('has no inline script, inline style or event-handler attribute, and every form control is labelled', () => {
    const page = parsePage(html);
    assert.ok(page.scripts.length >= 1);
    for (const script of page.scripts) {
      assert.ok(script.src, 'every script has a src');
      assert.equal(script.body.trim(), '', 'no script has a body');
    }
    assert.deepEqual(page.eventHandlerAttributes, []);
    assert.equal(page.inlineStyles, 0);
    assert.equal(page.styleAttributes, 0);
    assert.deepEqual(page.unlabelled, []);
    assert.match(html, /<html lang="en">/);
    assert.match(html, /<meta name="viewport" content="width=device-width, initial-scale=1">/);
  });

  it('fingerprints asset URLs so they can be cached for a year, with the right content types', async () => {
    const page = parsePage(html);
    const assets = [...page.scripts.map((script) => script.src!), ...page.stylesheets];
    const expectedTypes: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
    const releases = new Set<string>();
    for (const url of assets) {
      const match = /^\/dashboard\/assets\/([A-Za-z0-9_-]{16})\/[a-z-]+\.(js|css)$/.exec(url);
      assert.ok(match, `${url} is fingerprinted`);
      releases.add(match[1]!);
      const response = await server.fetch(url);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), expectedTypes[match[2]!]);
      assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.match(response.headers.get('etag') ?? '', /^"[A-Za-z0-9_-]{16}"$/);
      assert.ok((await response.arrayBuffer()).byteLength > 100);
    }
    assert.equal(releases.size, 1, 'every asset comes from one release directory');
  });

  it('serves every module the entry script imports, transitively, from the same fingerprinted directory', async () => {
    const entry = parsePage(html).scripts.find((script) => script.type === 'module')!.src!;
    const seen = new Set<string>();
    const queue = [new URL(entry, server.url).href];
    while (queue.length > 0) {
      const url = queue.shift()!;
      if (seen.has(url)) continue;
      seen.add(url);
      const response = await server.fetch(new URL(url).pathname);
      assert.equal(response.status, 200, `${url} is served`);
      assert.equal(response.headers.get('content-type'), 'text/javascript; charset=utf-8');
      assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable', `${url} is immutable`);
      const source = await response.text();
      for (const [, specifier] of source.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s*'([^']+)'/gm)) {
        assert.match(specifier!, /^\.\/[a-z-]+\.js$/, `${url} imports ${specifier} by a relative path`);
        queue.push(new URL(specifier!, url).href);
      }
    }
    // The entry, the helpers, every view and the vendored chart library.
    const names = [...seen].map((url) => url.slice(url.lastIndexOf('/') + 1));
    for (const name of [
      'dashboard.js',
      'api.js',
      'sse.js',
      'playground-view.js',
      'admin-view.js',
      'overview-view.js',
      'prometheus.js',
      'uplot.js',
    ])
      assert.ok(names.includes(name), `${name} is in the module graph`);
  });

  it('makes an unfingerprinted or stale asset URL revalidate, and answers 304 to a matching If-None-Match', async () => {
    for (const path of ['/dashboard/assets/sse.js', '/dashboard/assets/AAAAAAAAAAAAAAAA/sse.js']) {
      const response = await server.fetch(path);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('cache-control'), 'no-cache');
      await response.arrayBuffer();
    }
    const etag = pageResponse.headers.get('etag')!;
    const revalidated = await server.fetch('/dashboard', { headers: { 'if-none-match': etag } });
    assert.equal(revalidated.status, 304);
    assert.equal((await revalidated.arrayBuffer()).byteLength, 0);
    const changed = await server.fetch('/dashboard', { headers: { 'if-none-match': '"something-else"' } });
    assert.equal(changed.status, 200);
    assert.equal(await changed.text(), html);
    const stylesheet = parsePage(html).stylesheets[0]!;
    const first = await server.fetch(stylesheet);
    await first.arrayBuffer();
    const again = await server.fetch(stylesheet, { headers: { 'if-none-match': first.headers.get('etag')! } });
    assert.equal(again.status, 304);
    await again.arrayBuffer();
  });

  it('answers 404 in the contract error shape for an unknown asset and 405 for a POST', async () => {
    const missing = await server.fetch('/dashboard/assets/secrets.json');
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as { error: { code: string } }).error.code, 'not_found');
    for (const path of [
      '/dashboard/assets/..%2F..%2Fpackage.json',
      '/dashboard/assets/AAAAAAAAAAAAAAAA/..%2F..%2Fpackage.json',
      '/dashboard/assets/not-a-release/sse.js',
      '/dashboard/assets/AAAAAAAAAAAAAAAA/index.html',
    ]) {
      const refused = await server.fetch(path);
      assert.equal(refused.status, 404, path);
      await refused.arrayBuffer();
    }
    const posted = await server.post('/dashboard', {});
    assert.equal(posted.status, 405);
    assert.equal(posted.headers.get('allow'), 'GET, HEAD');
    await posted.arrayBuffer();
  });
});

describe('the dashboard SSE parser', () => {
  type SseEvent = { event: string; data: string; id: string };
  let createSseParser: (onEvent: (event: SseEvent) => void) => { feed(text: string): void };

  before(async () => {
    // Plain browser JS, loaded as the ES module the page loads.
    const module = (await import(new URL('../../web/dashboard/sse.js', import.meta.url).href)) as {
      createSseParser: typeof createSseParser;
    };
    createSseParser = module.createSseParser;
  });

  const stream =
    'id: st_a:1\r\nevent: start\r\ndata: {"model":"m"}\r\n\r\n: ping\n\nevent: delta\ndata: {"text":"Hel"}\n\n' +
    'event: delta\rdata: {"text":"lo"}\r\rdata: line one\ndata: line two\n\nid: st_a:5\nevent: done\ndata:{"finish_reason":"stop"}\n\n' +
    'event: delta\ndata: {"text":"cut off"}';
  const expected: SseEvent[] = [
    // The last event id persists until another comes (a resume sends it back).
    { event: 'start', data: '{"model":"m"}', id: 'st_a:1' },
    { event: 'delta', data: '{"text":"Hel"}', id: 'st_a:1' },
    { event: 'delta', data: '{"text":"lo"}', id: 'st_a:1' },
    { event: 'message', data: 'line one\nline two', id: 'st_a:1' },
    { event: 'done', data: '{"finish_reason":"stop"}', id: 'st_a:5' },
  ];

  it('yields the same events whether the stream arrives whole or split at every character', () => {
    const whole: SseEvent[] = [];
    createSseParser((event) => whole.push(event)).feed(stream);
    assert.deepEqual(whole, expected);
    const split: SseEvent[] = [];
    const parser = createSseParser((event) => split.push(event));
    for (const char of stream) parser.feed(char);
    assert.deepEqual(split, expected);
  });

  it('does not split a CRLF that arrives in two chunks into two line ends', () => {
    const events: SseEvent[] = [];
    const parser = createSseParser((event) => events.push(event));
    parser.feed('data: a\r');
    parser.feed('\ndata: b\r');
    parser.feed('\n\r\n');
    assert.deepEqual(events, [{ event: 'message', data: 'a\nb', id: '' }]);
  });
});

describe("the overview's metrics reader", () => {
  type Samples = Map<string, Array<{ labels: Record<string, string>; value: number }>>;
  interface Reader {
    parsePrometheus(text: string): Samples;
    sumOf(samples: Samples, name: string, keep?: (labels: Record<string, string>) => boolean): number;
    sumBy(samples: Samples, name: string, label: string): Map<string, number>;
    bucketsOf(samples: Samples, name: string): Map<number, number>;
    quantileBetween(before: Map<number, number>, after: Map<number, number>, q: number): number | null;
  }
  let reader: Reader;
  let server: TestServer;

  before(async () => {
    reader = (await import(new URL('../../web/dashboard/prometheus.js', import.meta.url).href)) as Reader;
    server = await bootServer();
  });
  after(() => server.close());

  it("reads the server's own /metrics: request counts by route, the stream gauge and quota units by plan", async () => {
    for (let index = 0; index < 3; index += 1) {
      const reply = await server.post('/api/chat/', { message: 'hello' });
      assert.equal(reply.status, 200);
      await reply.arrayBuffer();
    }
    const samples = reader.parsePrometheus(await (await server.fetch('/metrics')).text());
    assert.equal(
      reader.sumOf(samples, 'colloquy_http_requests_total', (labels) => labels.route === '/api/chat'),
      3,
    );
    assert.equal(reader.sumOf(samples, 'colloquy_active_streams'), 0);
    assert.deepEqual([...reader.sumBy(samples, 'colloquy_quota_units_total', 'plan')], [['free', 3]]);
    const buckets = reader.bucketsOf(samples, 'colloquy_http_request_duration_seconds');
    assert.ok(buckets.get(Number.POSITIVE_INFINITY)! >= 3);
  });

  it('parses escaped label values, exponents and timestamps, and skips a malformed line', () => {
    const samples = reader.parsePrometheus(
      [
        '# HELP odd A metric.',
        '# TYPE odd counter',
        'odd{path="a\\"b\\\\c\\nd",x="1"} 1.5e3 1700000000000',
        'odd{broken="} 7',
        'plain 42',
        '',
      ].join('\n'),
    );
    assert.deepEqual(samples.get('odd'), [{ labels: { path: 'a"b\\c\nd', x: '1' }, value: 1500 }]);
    assert.deepEqual(samples.get('plain'), [{ labels: {}, value: 42 }]);
  });

  it('computes quantiles between two scrapes as histogram_quantile does, and none without observations', () => {
    const before = new Map([
      [0.1, 10],
      [0.5, 10],
      [Number.POSITIVE_INFINITY, 10],
    ]);
    const after = new Map([
      [0.1, 60],
      [0.5, 110],
      [Number.POSITIVE_INFINITY, 110],
    ]);
    // 50 new observations at or under 0.1 s, 50 between 0.1 and 0.5 s.
    assert.equal(reader.quantileBetween(before, after, 0.5), 0.1);
    assert.ok(Math.abs(reader.quantileBetween(before, after, 0.99)! - 0.492) < 1e-9);
    assert.equal(reader.quantileBetween(after, after, 0.5), null);
    // Everything above the last finite bound: the answer is that bound.
    const slow = new Map([
      [0.1, 0],
      [0.5, 0],
      [Number.POSITIVE_INFINITY, 5],
    ]);
    assert.equal(reader.quantileBetween(new Map(), slow, 0.5), 0.5);
  });
});
