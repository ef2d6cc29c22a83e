/**
 * Debian's Chromium driven by playwright-core, the way the browser tests launch it: headless, a
 * fresh empty profile per launch (playwright-core refuses `--user-data-dir` among the args, so
 * the profile is the persistent context's folder), nothing that phones home.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launch(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'fullstop-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1000, height: 760 },
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Where the browser tests write what they produce (screenshots): outside the repository. */
export function outputDir(): string {
  const dir = join(tmpdir(), 'fullstop-e2e-output');
  return dir;
}
