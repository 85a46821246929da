/**
 * Headless Chromium (Debian's, installed by scripts/test-setup.sh) with a throwaway profile, for
 * the browser tests: no sync, no background traffic, nothing but the pages a test opens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** A running browser and how to close it (the profile goes with it). */
export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Starts Chromium with a fresh profile; `viewport` sets the page size, `permissions` what pages may use. */
export async function launchChromium(
  options: { viewport?: { width: number; height: number }; permissions?: string[] } = {},
): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'colloquy-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    ...(options.viewport ? { viewport: options.viewport } : {}),
    ...(options.permissions ? { permissions: options.permissions } : {}),
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
