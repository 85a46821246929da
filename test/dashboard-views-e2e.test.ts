/**
 * The dashboard's pickers and charts in headless Chromium (Debian's `chromium`, driven by
 * playwright-core) against the real server: the playground's options come from the API and reach
 * the request, plans are picked from the configured ones, and the overview draws live charts from
 * the server's own /metrics while real traffic runs. Screenshots go to test-output/dashboard/.
 * Without Chromium these tests fail: they never skip.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium, type TestBrowser } from './helpers/chromium.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN_TOKEN = 'dashboard-views-admin-token-0123456789';
const SHOTS = fileURLToPath(new URL('../../test-output/dashboard/', import.meta.url));
const REFUNDS_URL = 'https://docs.example.org/handbook/refunds';

interface InPage {
  document: {
    documentElement: { scrollWidth: number; clientWidth: number };
    getElementById(id: string): { textContent: string | null } | null;
  };
}

describe('the dashboard pickers and overview in a browser', () => {
  let server: TestServer;
  let context: BrowserContext;
  let browser: TestBrowser;
  let userPage: Page;
  let adminPage: Page;
  let userKey = '';
  let teamKey = '';
  const pageProblems: string[] = [];
  const asAdmin = { authorization: `Bearer ${ADMIN_TOKEN}` };

  const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

  async function openPage(base = server.url): Promise<Page> {
    const page = await context.newPage();
    page.on('pageerror', (error) => pageProblems.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) pageProblems.push(`console: ${message.text()}`);
    });
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${base}/dashboard`);
    return page;
  }

  async function signIn(page: Page, role: 'user' | 'admin', secret: string): Promise<void> {
    if (role === 'admin') await page.getByLabel('The admin token').check();
    await page.getByLabel('Key or token').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#identity').waitFor({ state: 'visible' });
  }

  async function createUser(userId: string, plan: string): Promise<string> {
    const created = await server.post('/api/admin/users', { user_id: userId, plan }, asAdmin);
    assert.equal(created.status, 201);
    await created.arrayBuffer();
    const key = await server.post(`/api/admin/users/${userId}/keys`, {}, asAdmin);
    return ((await key.json()) as { key: string }).key;
  }

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN },
      config: {
        // Paced words: a reply takes a few seconds, so a stream is open across a metrics scrape.
        builtin_delay_ms: 60,
        models: [{ id: 'house-notes', provider: 'builtin' }],
        plans: {
          free: { quota: 50, window_seconds: 86400 },
          pro: { quota: 2000, window_seconds: 86400 },
          team: { quota: 300, window_seconds: 3600, max_parallel: 8, tokens: { quota: 50_000, window_seconds: 3600 } },
        },
      },
    });
    for (const document of [
      {
        title: 'Refund policy',
        collection: 'handbook',
        url: REFUNDS_URL,
        text: 'Refunds are paid within 14 days of the return arriving. A refund goes back to the card that paid.',
      },
      {
        title: 'Press kit',
        collection: 'press',
        text: 'The logo comes in three colours. Journalists may use the photographs with a credit line.',
      },
    ]) {
      const added = await server.post('/api/rag/documents', document, asAdmin);
      assert.equal(added.status, 201);
      await added.arrayBuffer();
    }
    userKey = await createUser('grace', 'free');
    teamKey = await createUser('hopper', 'team');
    browser = await launchChromium({ viewport: { width: 1100, height: 900 } });
    context = browser.context;
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('the playground offers the configured models and the knowledge-base collections from the API', async () => {
    userPage = await openPage();
    await signIn(userPage, 'user', userKey);
    await userPage.getByRole('heading', { name: 'Playground' }).waitFor();
    // The lists are filled from the API after the page shows: wait for their last entries.
    await userPage.locator('#playground-model option[value="house-notes"]').waitFor({ state: 'attached' });
    await userPage.locator('#playground-collection option[value="press"]').waitFor({ state: 'attached' });
    await userPage.locator('#playground-quota-text', { hasText: '50 of 50 left' }).waitFor();

    const models = await userPage
      .locator('#playground-model option')
      .evaluateAll((options) =>
        options.map((option) => [option.getAttribute('value'), (option as unknown as { selected: boolean }).selected]),
      );
    assert.deepEqual(models, [
      ['builtin-extractive', false],
      ['house-notes', true],
    ]);
    const collections = await userPage
      .locator('#playground-collection option')
      .evaluateAll((options) => options.map((option) => option.getAttribute('value')));
    assert.deepEqual(collections, ['', 'handbook', 'press']);
    assert.equal(await userPage.getByLabel('Collection').isDisabled(), true);
    await userPage.getByLabel('Knowledge base').check();
    assert.equal(await userPage.getByLabel('Collection').isEnabled(), true);
    assert.equal(await userPage.getByLabel('Web search').isChecked(), false);
    assert.equal(await userPage.getByLabel('Deep thinking').isChecked(), false);
    assert.equal(await userPage.locator('#playground-quota-text').textContent(), '50 of 50 left');
  });

  it('sends the chosen model, collection, web search and deep thinking, shows the reasoning, sources as links and the quota bar', async () => {
    await userPage.getByLabel('Model').selectOption('builtin-extractive');
    await userPage.getByLabel('Collection').selectOption('handbook');
    await userPage.getByLabel('Web search').check();
    await userPage.getByLabel('Deep thinking').check();
    await userPage.getByLabel('Session id').fill('refund-questions');
    await userPage.getByLabel('Message', { exact: true }).fill('How fast are refunds paid?');
    const sent = userPage.waitForRequest((request) => request.url().endsWith('/api/chat/stream'));
    await userPage.getByRole('button', { name: 'Send' }).click();
    const body = JSON.parse((await sent).postData() ?? '{}') as Record<string, unknown>;
    assert.deepEqual(body, {
      message: 'How fast are refunds paid?',
      model: 'builtin-extractive',
      rag: { collection: 'handbook' },
      web_search: true,
      deep_thinking: true,
      session_id: 'refund-questions',
      resumable: true,
    });
    await userPage.locator('#playground-output[aria-busy="false"]').waitFor({ timeout: 20_000 });
    await userPage.locator('#playground-meta', { hasText: /Model builtin-extractive: stop/ }).waitFor();

    assert.match((await userPage.locator('#playground-output').textContent()) ?? '', /14 days/);
    assert.equal(await userPage.locator('#playground-thinking-box').isVisible(), true);
    assert.match((await userPage.locator('#playground-thinking').textContent()) ?? '', /\S/);
    const link = userPage.locator('#playground-sources a', { hasText: 'Refund policy' }).first();
    assert.equal(await link.getAttribute('href'), REFUNDS_URL);
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');
    assert.equal(await userPage.locator('#playground-sources a', { hasText: 'Press kit' }).count(), 0);

    // The bar beside Send follows the quota: one chat taken.
    await userPage.locator('#playground-quota-text', { hasText: '49 of 50 left' }).waitFor();
    assert.equal(await userPage.locator('#playground-quota').getAttribute('aria-valuetext'), '1 of 50 used, 49 remaining');
    assert.equal(await userPage.locator('#playground-quota').evaluate((bar) => (bar as unknown as { value: number }).value), 1);
    await shot(userPage, '11-playground-options');
  });

  it('an unknown collection offered by a stale page is refused with the contract error, not answered empty', async () => {
    const response = await server.post(
      '/api/chat/stream',
      { message: 'Anything?', rag: { collection: 'gone' } },
      { authorization: `Bearer ${userKey}` },
    );
    assert.equal(response.status, 404);
    assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'not_found');
  });

  it('an admin picks plans from the configured ones, sees them listed, and the default is preselected', async () => {
    adminPage = await openPage();
    await signIn(adminPage, 'admin', ADMIN_TOKEN);
    await adminPage.locator('#plans-body tr[data-plan="team"]').waitFor();
    const rows = await adminPage.locator('#plans-body tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-plan')));
    assert.deepEqual(rows, ['free', 'pro', 'team']);
    assert.match((await adminPage.locator('#plans-body tr[data-plan="team"]').textContent()) ?? '', /300.*1 h.*8/);
    const offered = await adminPage
      .locator('#new-user-plan option')
      .evaluateAll((options) => options.map((option) => option.getAttribute('value')));
    assert.deepEqual(offered, ['free', 'pro', 'team']);
    assert.equal(await adminPage.locator('#new-user-plan').inputValue(), 'free');

    await adminPage.getByLabel('User id').first().fill('lovelace');
    await adminPage.getByLabel('Plan', { exact: true }).selectOption('team');
    await adminPage.getByRole('button', { name: 'Create user' }).click();
    await adminPage.locator('#users-body tr[data-user-id="lovelace"] td[data-label="Plan"]', { hasText: 'team' }).waitFor();
    // The form resets to the default plan, and "Select" puts the user's own plan in the change form.
    assert.equal(await adminPage.locator('#new-user-plan').inputValue(), 'free');
    await adminPage.getByRole('button', { name: 'Fill the forms with lovelace' }).click();
    assert.equal(await adminPage.getByLabel('New plan').inputValue(), 'team');
    await adminPage.getByLabel('New plan').selectOption('pro');
    await adminPage.getByRole('button', { name: 'Set plan' }).click();
    await adminPage.locator('#users-body tr[data-user-id="lovelace"] td[data-label="Plan"]', { hasText: 'pro' }).waitFor();
    const stored = await server.fetch('/api/admin/users/lovelace', { headers: asAdmin });
    assert.equal(((await stored.json()) as { plan: string }).plan, 'pro');
    await adminPage.getByRole('button', { name: 'I have saved it' }).click();
    await shot(adminPage, '12-admin-plan-pickers');
  });

  it('the overview draws live charts of request rate, latency, time to first token, open streams and quota per plan from /metrics', async () => {
    await adminPage.getByRole('button', { name: 'Overview' }).click();
    await adminPage.getByRole('heading', { name: 'Request rate' }).waitFor();
    assert.equal(await adminPage.locator('#admin-view').isHidden(), true);
    // uPlot draws one canvas per chart.
    await adminPage.locator('#chart-quota canvas').waitFor();
    assert.equal(await adminPage.locator('.chart canvas').count(), 5);

    // Real traffic on two plans, with streams that stay open across a scrape.
    const chat = (key: string, path: string) =>
      server.post(path, { message: 'What is new?' }, { authorization: `Bearer ${key}` }).then((response) => response.text());
    const traffic = [
      ...Array.from({ length: 3 }, () => chat(userKey, '/api/chat/stream')),
      ...Array.from({ length: 2 }, () => chat(teamKey, '/api/chat/stream')),
      chat(teamKey, '/api/chat/'),
    ];
    await adminPage.waitForFunction(
      () => Number((globalThis as unknown as InPage).document.getElementById('chart-streams-latest')?.textContent) >= 1,
      undefined,
      { timeout: 15_000 },
    );
    // Each figure is caught at the scrape that saw it: quota and time to first token as the replies start,
    // latency as they end.
    const shows = (id: string, pattern: RegExp) =>
      adminPage.waitForFunction(
        ([target, source]) =>
          new RegExp(source!).test((globalThis as unknown as InPage).document.getElementById(target!)?.textContent ?? ''),
        [id, pattern.source],
        { timeout: 15_000 },
      );
    await Promise.all([
      shows('chart-quota-latest', /(free|team) [1-9]/),
      shows('chart-ttft-p50', /^\d+(\.\d+)? ms$/),
      shows('chart-ttft-p99', /^\d+(\.\d+)? ms$/),
      shows('chart-latency-p50', /^\d+(\.\d+)? ms$/),
      shows('chart-latency-p99', /^\d+(\.\d+)? ms$/),
      shows('chart-rate-latest', /^(0\.0*[1-9]|[1-9])[\d.]* req\/s$/),
    ]);
    await Promise.all(traffic);
    await shot(adminPage, '13-overview-live');

    // Once the streams ended the gauge goes back to zero, and idle seconds show no API requests.
    await adminPage.locator('#chart-streams-latest', { hasText: /^0$/ }).waitFor({ timeout: 10_000 });
    await adminPage.locator('#chart-rate-latest', { hasText: /^0 req\/s$/ }).waitFor({ timeout: 10_000 });
    assert.match((await adminPage.locator('#chart-quota-latest').textContent()) ?? '', /free .*team|team .*free/);
    assert.match((await adminPage.locator('#overview-updated').textContent()) ?? '', /^Updated /);
  });

  it('the overview fits a phone-sized screen without sideways scrolling, and Administration returns', async () => {
    await adminPage.setViewportSize({ width: 390, height: 844 });
    // Give the resize observer a frame to shrink the charts.
    await adminPage.waitForTimeout(300);
    const overflow = await adminPage.evaluate(() => {
      const root = (globalThis as unknown as InPage).document.documentElement;
      return root.scrollWidth - root.clientWidth;
    });
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
    await shot(adminPage, '14-overview-phone');
    await adminPage.setViewportSize({ width: 1100, height: 900 });
    await adminPage.getByRole('button', { name: 'Administration' }).click();
    await adminPage.getByRole('heading', { name: 'Create a user' }).waitFor();
    assert.equal(await adminPage.locator('#overview-view').isHidden(), true);
  });

  it('the usage card charts the last 30 days from GET /api/usage and follows the playground', async () => {
    const usage = (await (await server.fetch('/api/usage', { headers: { authorization: `Bearer ${userKey}` } })).json()) as any;
    assert.ok(usage.total.requests >= 1);
    await userPage.locator('#usage-refresh').click();
    const tokens = usage.total.input_tokens + usage.total.output_tokens;
    await userPage
      .locator('#usage-total', {
        hasText: `${usage.total.requests} requests, ${tokens} tokens (${usage.total.input_tokens} in, ${usage.total.output_tokens} out), 0 failed`,
      })
      .waitFor();
    await userPage.locator('#usage-chart canvas').waitFor();
  });

  it('a plan with a token budget shows its tokens beside the requests, and a chat moves both', async () => {
    const teamPage = await openPage();
    await signIn(teamPage, 'user', teamKey);
    await teamPage.locator('#quota-tokens').waitFor();
    const before = await teamPage.locator('#quota-tokens-text').textContent();
    assert.match(before ?? '', /^\d+ of 50000 tokens used, \d+ left$/);
    const usedBefore = Number(/^(\d+)/.exec(before ?? '')?.[1]);
    const reply = await server.post('/api/chat', { message: 'When are refunds paid?', rag: true }, { authorization: `Bearer ${teamKey}` });
    const body = (await reply.json()) as { remaining_tokens: number };
    assert.equal(typeof body.remaining_tokens, 'number');
    await teamPage.locator('#quota-refresh').click();
    await teamPage.locator('#quota-tokens-text', { hasText: `${50_000 - body.remaining_tokens} of 50000 tokens used` }).waitFor();
    assert.ok(50_000 - body.remaining_tokens > usedBefore);
    // A plan without a token budget shows no token bar.
    assert.equal(await userPage.locator('#quota-tokens').isHidden(), true);
    await teamPage.close();
  });

  it('the playground resumes a reply by itself after the connection drops, and the answer comes out whole', async () => {
    // A TCP proxy in front of the server, as a phone network or a load balancer would be: cutting
    // its connections drops the reply mid-stream, and the next request makes a new connection.
    const port = Number(new URL(server.url).port);
    const sockets = new Set<Socket>();
    const proxy = createNetServer((client) => {
      const upstream = connect(port, '127.0.0.1');
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const forget = () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      client.on('error', forget).on('close', forget);
      upstream.on('error', forget).on('close', forget);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const question = 'What is the refund policy about cards?';
      const expected = (await (
        await server.post('/api/chat', { message: question, model: 'house-notes' }, { authorization: `Bearer ${userKey}` })
      ).json()) as { response: string };
      const page = await openPage(proxied);
      await signIn(page, 'user', userKey);
      await page.getByLabel('Model').selectOption('house-notes');
      await page.getByLabel('Message', { exact: true }).fill(question);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('#playground-output', { hasText: /^\S+ \S+ \S+ \S+/ }).waitFor();
      for (const socket of sockets) socket.destroy();
      await page.locator('#playground-meta', { hasText: /Model house-notes: stop/ }).waitFor({ timeout: 20_000 });
      assert.equal(await page.locator('#playground-output').textContent(), expected.response);
      const metrics = await (await server.fetch('/metrics')).text();
      assert.match(metrics, /colloquy_stream_resumes_total [1-9]/);
      await page.close();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it('ran without a script error or Content-Security-Policy violation', () => {
    assert.deepEqual(pageProblems, []);
  });
});
