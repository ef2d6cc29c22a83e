/**
 * Two agent servers in one fleet (Redis): the page is on A, where the turn runs; the Stop is
 * posted to B; A's page shows `cancelled` and the stop's timeline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveDescendants } from '../support/leaks.js';
import { launch, type Browser } from './browser.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './fleet-keys.js';
import { ServerProcess } from './server-process.js';

const prefix = uniquePrefix('e2e');
let a: ServerProcess;
let b: ServerProcess;
let browser: Browser;

beforeAll(async () => {
  const args = (node: string) => ['--redis', REDIS_URL, '--node-id', node, '--fleet-prefix', prefix];
  [a, b, browser] = await Promise.all([ServerProcess.start(args('A')), ServerProcess.start(args('B')), launch()]);
});
afterAll(async () => {
  await browser?.close();
  const exits = await Promise.all([a, b].filter(Boolean).map((s) => s.terminate()));
  for (const exit of exits) expect(exit.code).toBe(0);
  await removeKeys(prefix);
  expect(await keysOf(prefix)).toEqual([]);
  expect(liveDescendants()).toEqual([]);
});

describe('the agent page with two instances', () => {
  it("runs the turn on A, takes the Stop on B, and A's page shows cancelled", async () => {
    const page = await browser.context.newPage();
    await page.goto(`${a.url}?session=fleet-e2e`);
    await page.getByTestId('prompt').fill('crunch');
    await page.getByTestId('send').click();
    await page.waitForFunction(() => document.querySelector('.tool.running .state')?.textContent?.startsWith('running'), null, { timeout: 10_000 });
    expect(await page.getByTestId('status').textContent()).toBe('running');
    expect(await page.locator('#node').textContent()).toBe('A');

    const posted = Date.now();
    const stop = await b.post('/api/sessions/fleet-e2e/stop', { reason: 'cancel.user' });
    expect(stop.body).toMatchObject({ outcome: 'stopped', node: 'A', sessionId: 'fleet-e2e' });
    await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent === 'cancelled', null, { timeout: 2000 });
    await page.getByTestId('report').waitFor({ state: 'visible', timeout: 1000 });
    console.log(`stop posted to B → cancelled on A's page: ${Date.now() - posted} ms`);
    expect(await page.locator('[data-testid="report"] .phase').count()).toBe(6);
    expect(await page.getByTestId('stop').isDisabled()).toBe(true);

    // The session is free again: the next turn from A's page completes.
    await page.getByTestId('prompt').fill('hello');
    await page.getByTestId('send').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent === 'completed', null, { timeout: 20_000 });
    await page.close();
  });
});
