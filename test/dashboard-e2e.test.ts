/**
 * The dashboard driven in headless Chromium (Debian's `chromium`, driven by playwright-core) against
 * the real server: an admin creates a user and their first key, the user signs in with it, manages
 * keys, sends a playground message and clears the session. Each main state is saved as a
 * screenshot under test-output/dashboard/. Without Chromium these tests fail: they never skip.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium, type TestBrowser } from './helpers/chromium.js';
import { bootServer, type TestServer } from './helpers/server.js';

const ADMIN_TOKEN = 'dashboard-e2e-admin-token-0123456789';
const USER_ID = 'ada';
const SESSION_ID = 'e2e-session';
const SHOTS = fileURLToPath(new URL('../../test-output/dashboard/', import.meta.url));

/**
 * The few browser globals the in-page callbacks touch. Tests compile without the DOM library, so
 * callbacks cast globalThis to this (the cast is erased before Playwright serialises them).
 */
interface InPage {
  document: { getElementById(id: string): InPageNode | null; documentElement: { scrollWidth: number; clientWidth: number } };
  sessionStorage: { length: number };
  navigator: { clipboard: { readText(): Promise<string> } };
  MutationObserver: new (callback: () => void) => { observe(target: InPageNode, options: Record<string, boolean>): void };
  replyChanges: { whileBusy: number };
}
interface InPageNode {
  textContent: string | null;
  getAttribute(name: string): string | null;
}

describe('the dashboard in a browser', () => {
  let server: TestServer;
  let context: BrowserContext;
  let browser: TestBrowser;
  let adminPage: Page;
  let userPage: Page;
  let firstKey = '';
  let secondKey = '';
  const pageProblems: string[] = [];

  const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  const asUser = (key: string) => ({ authorization: `Bearer ${key}` });

  /** A new tab that records script errors and CSP violations (both must stay empty). */
  async function openPage(): Promise<Page> {
    const page = await context.newPage();
    page.on('pageerror', (error) => pageProblems.push(`pageerror: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) pageProblems.push(`console: ${message.text()}`);
    });
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${server.url}/dashboard`);
    return page;
  }

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    server = await bootServer({
      env: { COLLOQUY_ADMIN_TOKEN: ADMIN_TOKEN },
      // Paced words, so the reply visibly arrives in pieces.
      config: { builtin_delay_ms: 15 },
    });
    browser = await launchChromium({ viewport: { width: 1100, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'] });
    context = browser.context;
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('an admin signs in with the admin token, creates a user with a first key shown once, and changes their plan', async () => {
    adminPage = await openPage();
    await adminPage.getByLabel('The admin token').check();
    await adminPage.getByLabel('Key or token').fill(ADMIN_TOKEN);
    await adminPage.getByLabel('Stay signed in while this tab is open').check();
    await adminPage.getByRole('button', { name: 'Sign in' }).click();
    await adminPage.getByRole('heading', { name: 'Create a user' }).waitFor();
    assert.equal(await adminPage.locator('#whoami').textContent(), 'administrator');

    await adminPage.locator('#new-user-id').fill(USER_ID);
    // Plans are picked from the configured ones (GET /api/admin/plans), the default one preselected.
    assert.equal(await adminPage.locator('#new-user-plan').inputValue(), 'free');
    await adminPage.getByLabel('Plan', { exact: true }).selectOption('pro');
    await adminPage.getByRole('button', { name: 'Create user' }).click();
    await adminPage.locator('#secret-panel').waitFor({ state: 'visible' });
    firstKey = await adminPage.locator('#secret-value').inputValue();
    assert.match(firstKey, /^ck_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.match((await adminPage.locator('#status').textContent()) ?? '', /ada was created on plan pro with a first key/);
    await adminPage.locator(`#users-body tr[data-user-id="${USER_ID}"]`).waitFor();
    await shot(adminPage, '01-admin-user-created');

    // The key works against the API before anyone signs in with it.
    const quota = await server.fetch('/api/chat/quota/me', { headers: asUser(firstKey) });
    assert.equal(quota.status, 200);
    assert.equal(((await quota.json()) as { user_id: string }).user_id, USER_ID);

    await adminPage.getByRole('button', { name: 'I have saved it' }).click();
    assert.equal(await adminPage.locator('#secret-panel').isHidden(), true);
    assert.equal(await adminPage.locator('#secret-value').inputValue(), '');

    await adminPage.getByRole('button', { name: `Fill the forms with ${USER_ID}` }).click();
    await adminPage.getByLabel('New plan').selectOption('free');
    await adminPage.getByRole('button', { name: 'Set plan' }).click();
    await adminPage.locator(`#users-body tr[data-user-id="${USER_ID}"] td[data-label="Plan"]`, { hasText: 'free' }).waitFor();
    assert.match((await adminPage.locator('#status').textContent()) ?? '', /ada is now on plan free/);

    // Only configured plans can be chosen; one that is not configured is refused by the API with the field named.
    const offered = await adminPage
      .locator('#plan-name option')
      .evaluateAll((options) => options.map((option) => option.getAttribute('value')));
    assert.deepEqual(offered, ['free', 'pro']);
    const refused = await server.fetch(`/api/admin/users/${USER_ID}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'platinum' }),
    });
    assert.equal(refused.status, 400);
    assert.match(JSON.stringify(await refused.json()), /"path":"plan"/);
    await shot(adminPage, '02-admin-plan-changed');

    await adminPage.getByRole('button', { name: 'Look up' }).click();
    await adminPage.locator('#lookup-result').waitFor({ state: 'visible' });
    const lookup = (await adminPage.locator('#lookup-result').textContent()) ?? '';
    assert.match(lookup, /Planfree/);
    assert.match(lookup, /Used0 of 50/);
  });

  it('keeps the admin signed in across a reload only when asked, and signing out forgets the token', async () => {
    await adminPage.reload();
    await adminPage.getByRole('heading', { name: 'Create a user' }).waitFor();
    assert.equal(await adminPage.locator('#whoami').textContent(), 'administrator');
    await adminPage.getByRole('button', { name: 'Sign out' }).click();
    await adminPage.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.equal(await adminPage.evaluate(() => (globalThis as unknown as InPage).sessionStorage.length), 0);
    await adminPage.reload();
    await adminPage.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.equal(await adminPage.locator('#admin-view').isHidden(), true);
    await adminPage.close();
  });

  it('refuses a wrong key and the admin token offered as a key with a message, keeping nothing', async () => {
    const page = await openPage();
    await page.getByLabel('Key or token').fill(`ck_0000000000000000_${'x'.repeat(43)}`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not valid or has been revoked' }).waitFor();
    await page.getByLabel('Key or token').fill(ADMIN_TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'choose "The admin token"' }).waitFor();
    assert.equal(await page.locator('#sign-in').isVisible(), true);
    assert.equal(await page.locator('#user-view').isHidden(), true);
    assert.equal(await page.evaluate(() => (globalThis as unknown as InPage).sessionStorage.length), 0);
    await shot(page, '03-sign-in-refused');
    await page.close();
  });

  it('the user signs in with that key using only the keyboard and sees plan, quota with a countdown, and their key', async () => {
    userPage = await openPage();
    await userPage.locator('#secret').focus();
    await userPage.keyboard.type(firstKey);
    await userPage.keyboard.press('Enter');
    await userPage.getByRole('heading', { name: 'Plan and quota' }).waitFor();

    assert.equal(await userPage.locator('#whoami').textContent(), USER_ID);
    assert.equal(await userPage.locator('#quota-plan').textContent(), 'free');
    assert.equal(await userPage.locator('#quota-limit').textContent(), '50');
    assert.equal(await userPage.locator('#quota-remaining').textContent(), '50');
    assert.equal(await userPage.locator('#quota-bar').getAttribute('aria-valuetext'), '0 of 50 used, 50 remaining');
    const countdown = (await userPage.locator('#quota-countdown').textContent()) ?? '';
    assert.match(countdown, /^(\d+ d )?(\d+ h )?(\d+ min )?\d+ s$/);
    await userPage.waitForFunction(
      (before) => (globalThis as unknown as InPage).document.getElementById('quota-countdown')?.textContent !== before,
      countdown,
      { timeout: 3000 },
    );

    const rows = userPage.locator('#keys-body tr');
    assert.equal(await rows.count(), 1);
    assert.match((await rows.first().textContent()) ?? '', /this key/);

    // The key is nowhere but memory: not in the URL, not in a cookie, not in sessionStorage.
    assert.equal(userPage.url(), `${server.url}/dashboard`);
    assert.deepEqual(await context.cookies(), []);
    assert.equal(await userPage.evaluate(() => (globalThis as unknown as InPage).sessionStorage.length), 0);
    await shot(userPage, '04-user-signed-in');
  });

  it('the user creates a second key, copies it, and after revoking it a call with it gets 401', async () => {
    await userPage.getByRole('button', { name: 'Create a key' }).click();
    await userPage.locator('#secret-panel').waitFor({ state: 'visible' });
    secondKey = await userPage.locator('#secret-value').inputValue();
    assert.match(secondKey, /^ck_[0-9a-f]{16}_/);
    assert.notEqual(secondKey, firstKey);

    await userPage.getByRole('button', { name: 'Copy' }).click();
    await userPage.getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await userPage.evaluate(() => (globalThis as unknown as InPage).navigator.clipboard.readText()), secondKey);
    await shot(userPage, '05-user-key-created');

    const works = await server.fetch('/api/keys', { headers: asUser(secondKey) });
    assert.equal(works.status, 200);
    await works.arrayBuffer();

    await userPage.getByRole('button', { name: 'I have saved it' }).click();
    const secondId = /^ck_([0-9a-f]{16})_/.exec(secondKey)![1]!;
    const secondRow = userPage.locator(`#keys-body tr[data-key-id="${secondId}"]`);
    await secondRow.getByRole('button', { name: /^Revoke key/ }).click();
    await secondRow.getByText('revoked').waitFor();

    const refused = await server.fetch('/api/keys', { headers: asUser(secondKey) });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'unauthorized');
    // The key the page is signed in with still works.
    const stillWorks = await server.fetch('/api/keys', { headers: asUser(firstKey) });
    assert.equal(stillWorks.status, 200);
    await stillWorks.arrayBuffer();
    await shot(userPage, '06-user-key-revoked');
  });

  it('a playground message streams its reply into the page as it arrives and the quota drops by one', async () => {
    await userPage.getByLabel('Session id').fill(SESSION_ID);
    // Count the reply's changes while it is still streaming (aria-busy) to see it arrive in pieces.
    await userPage.evaluate(() => {
      const browser = globalThis as unknown as InPage;
      const output = browser.document.getElementById('playground-output')!;
      const seen = { whileBusy: 0 };
      browser.replyChanges = seen;
      new browser.MutationObserver(() => {
        if (output.getAttribute('aria-busy') === 'true' && output.textContent) seen.whileBusy += 1;
      }).observe(output, { childList: true, characterData: true, subtree: true });
    });
    await userPage.getByLabel('Message', { exact: true }).fill('What does the dashboard show?');
    await userPage.getByLabel('Message', { exact: true }).press('Control+Enter');
    await userPage.locator('#playground-output[aria-busy="false"]').waitFor({ timeout: 15_000 });
    await userPage.locator('#playground-meta', { hasText: /stop|length/ }).waitFor();

    const reply = (await userPage.locator('#playground-output').textContent()) ?? '';
    assert.equal(await userPage.getByLabel('Message', { exact: true }).inputValue(), '');
    assert.ok(reply.trim().length > 0);
    const changes = await userPage.evaluate(() => (globalThis as unknown as InPage).replyChanges.whileBusy);
    assert.ok(changes > 1, `the reply arrived in ${changes} piece(s)`);

    await userPage.locator('#quota-remaining', { hasText: '49' }).waitFor();
    assert.equal(await userPage.locator('#quota-used').textContent(), '1');
    const row = userPage.locator(`#sessions-body tr[data-session-id="${SESSION_ID}"]`);
    await row.waitFor();
    assert.equal(await row.locator('td[data-label="Messages"]').textContent(), '2');

    // The server agrees: the stored session holds the question and this very reply.
    const stored = await server.fetch(`/api/chat/session/${SESSION_ID}`, { headers: asUser(firstKey) });
    const session = (await stored.json()) as { messages: Array<{ role: string; content: string }> };
    assert.deepEqual(
      session.messages.map((message) => message.role),
      ['user', 'assistant'],
    );
    assert.equal(session.messages[1]!.content, reply);
    await shot(userPage, '07-user-playground-reply');
  });

  it('the user clears the session and it is gone from the page and the API', async () => {
    const row = userPage.locator(`#sessions-body tr[data-session-id="${SESSION_ID}"]`);
    await row.getByRole('button', { name: `Clear session ${SESSION_ID}` }).click();
    await row.waitFor({ state: 'detached' });
    await userPage.locator('#sessions-empty').waitFor({ state: 'visible' });
    const gone = await server.fetch(`/api/chat/session/${SESSION_ID}`, { headers: asUser(firstKey) });
    assert.equal(gone.status, 404);
    await gone.arrayBuffer();
    await shot(userPage, '08-user-session-cleared');
  });

  it('the Stop button ends a reply that is still streaming', async () => {
    await userPage.getByLabel('Keep in session').uncheck();
    assert.equal(await userPage.getByLabel('Session id').isDisabled(), true);
    await userPage.getByLabel('Message', { exact: true }).fill('Tell me everything.');
    await userPage.getByRole('button', { name: 'Send' }).click();
    await userPage.waitForFunction(() =>
      Boolean((globalThis as unknown as InPage).document.getElementById('playground-output')?.textContent),
    );
    await userPage.getByRole('button', { name: 'Stop' }).click();
    await userPage.locator('#playground-meta', { hasText: 'Stopped.' }).waitFor();
    assert.equal(await userPage.getByRole('button', { name: 'Send' }).isEnabled(), true);
    assert.equal(await userPage.getByRole('button', { name: 'Stop' }).isDisabled(), true);
    // Unsent-in-full: the question stays in the box to try again.
    assert.equal(await userPage.getByLabel('Message', { exact: true }).inputValue(), 'Tell me everything.');
  });

  it('fits a phone-sized screen without sideways scrolling', async () => {
    await userPage.setViewportSize({ width: 390, height: 844 });
    const overflow = await userPage.evaluate(() => {
      const root = (globalThis as unknown as InPage).document.documentElement;
      return root.scrollWidth - root.clientWidth;
    });
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
    await shot(userPage, '09-user-phone');
  });

  it('revoking the key the page is signed in with signs the user out and the page reports it', async () => {
    await userPage.setViewportSize({ width: 1100, height: 900 });
    const current = userPage.locator('#keys-body tr', { hasText: 'this key' });
    await current.getByRole('button', { name: /^Revoke key/ }).click();
    await userPage.getByRole('heading', { name: 'Sign in' }).waitFor();
    assert.match((await userPage.getByRole('alert').textContent()) ?? '', /revoked/);
    const refused = await server.fetch('/api/chat/quota/me', { headers: asUser(firstKey) });
    assert.equal(refused.status, 401);
    await refused.arrayBuffer();
    await shot(userPage, '10-signed-out');
  });

  it('ran without a script error or Content-Security-Policy violation', () => {
    assert.deepEqual(pageProblems, []);
  });
});
