/**
 * The agent server's page in a real browser: type a prompt, Send, watch the reply stream, Stop,
 * see `cancelled` and the stop's timeline within a second, Send again and see `completed`.
 * Writes a screenshot of the stopped page to the output folder (see browser.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { TcpProxy } from '../support/tcp-proxy.js';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { eventually, isGone, liveDescendants } from '../support/leaks.js';
import { launch, outputDir, type Browser } from './browser.js';
import { ServerProcess, toolTree } from './server-process.js';

let server: ServerProcess;
let browser: Browser;

// The ledger on tmpfs where there is one: the 1 s bound is about the page and the stop, not about
// fdatasync on a disk that every parallel suite of the machine is writing to.
const data = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'fullstop-e2e-ledger-'));

beforeAll(async () => {
  // 127.0.0.1 on any port: the reconnect test reaches the server through a TCP proxy on its own
  // port, and the page's Host then names the proxy's.
  [server, browser] = await Promise.all([ServerProcess.start(['--data', data, '--allowed-hosts', '127.0.0.1']), launch()]);
});
afterAll(async () => {
  await browser?.close();
  if (server !== undefined) expect((await server.terminate()).code).toBe(0);
  rmSync(data, { recursive: true, force: true });
  expect(liveDescendants()).toEqual([]);
});

const text = (page: Page, id: string) => page.getByTestId(id).textContent();

async function waitForStatus(page: Page, status: string, ms: number): Promise<void> {
  await page.waitForFunction((s) => document.querySelector('[data-testid="status"]')?.textContent === s, status, { timeout: ms });
}

describe('the agent page', () => {
  it('sends, streams, stops (cancelled and the timeline within 1 s), then completes a new turn', async () => {
    const page = await browser.context.newPage();
    await page.goto(server.url);
    const sessionId = await text(page, 'session');
    expect(sessionId).toMatch(/^s-[0-9a-f]{12}$/);
    expect(new URL(page.url()).searchParams.get('session')).toBe(sessionId);
    expect(await text(page, 'status')).toBe('idle');
    expect(await page.getByTestId('stop').isDisabled()).toBe(true);

    // Every length the streamed reply passes through, as the page renders it.
    await page.evaluate(() => {
      const w = window as unknown as { lengths: number[] };
      w.lengths = [];
      new MutationObserver(() => w.lengths.push(document.querySelector('.say')?.textContent?.length ?? 0))
        .observe(document.querySelector('[data-testid="transcript"]')!, { subtree: true, childList: true, characterData: true });
    });
    await page.getByTestId('prompt').fill('crunch 3 numbers, then run the shell');
    await page.getByTestId('send').click();
    await waitForStatus(page, 'running', 10_000);
    await page.waitForFunction(() => document.querySelector('.say')?.textContent?.includes('about ten seconds'), null, { timeout: 10_000 });
    // Tokens streamed: the reply grew a word at a time, not in one piece.
    const lengths = await page.evaluate(() => (window as unknown as { lengths: number[] }).lengths);
    expect(new Set(lengths.filter((n) => n > 0)).size, JSON.stringify(lengths)).toBeGreaterThanOrEqual(8);
    // The crunch ran in its worker; now the shell's process tree runs: its tool row shows it live.
    await page.waitForFunction(() => document.querySelector('.tool.done')?.textContent?.startsWith('crunch'), null, { timeout: 20_000 });
    await page.waitForFunction(() => document.querySelector('.tool.running')?.textContent?.startsWith('shell'), null, { timeout: 20_000 });
    expect(await page.getByTestId('stop').isEnabled()).toBe(true);
    expect(await page.getByTestId('send').isDisabled()).toBe(true);

    // The shell's tree (sh and its two sleeps) runs under the server process.
    await eventually(() => toolTree(server.pid).length === 3, 10_000, 'sh and two sleeps');
    const tree = toolTree(server.pid);
    const clicked = Date.now();
    await page.getByTestId('stop').click();
    await waitForStatus(page, 'cancelled', 1000);
    await page.getByTestId('report').waitFor({ state: 'visible', timeout: 1000 });
    const stoppedIn = Date.now() - clicked;
    expect(stoppedIn).toBeLessThan(1000);
    for (const pid of tree) expect(isGone(pid), `pid ${pid}`).toBe(true);
    const phases = await page.locator('[data-testid="report"] .phase').evaluateAll((rows) => rows.map((r) => [
      (r as HTMLElement).dataset.phase, r.querySelector('.time')!.textContent,
    ]));
    expect(phases.map(([name]) => name)).toEqual(['signal', 'settle', 'hard stop', 'history', 'flush', 'emit']);
    for (const [, time] of phases) expect(time).toMatch(/^\d+(\.\d)? (ms|µs) → \+\d+(\.\d)? (ms|µs)$/);
    expect(await text(page, 'report')).toMatch(/reason cancel\.user/);
    expect(await page.locator('.tool.aborted').count()).toBe(1);
    expect(await page.locator('.tool.aborted .name').textContent()).toMatch(/^shell\(/);
    expect(await page.locator('.tool.aborted .state').textContent()).toMatch(/^aborted after \d+\.\d s$/);
    expect(await page.getByTestId('stop').isDisabled()).toBe(true);
    mkdirSync(outputDir(), { recursive: true });
    const shot = join(outputDir(), 'agent-server-stopped.png');
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot of the stopped page: ${shot} (stop to cancelled on the page: ${stoppedIn} ms)`);

    await page.getByTestId('prompt').fill('hello again');
    await page.getByTestId('send').click();
    await waitForStatus(page, 'completed', 20_000);
    expect(await page.getByTestId('report').isHidden()).toBe(true);
    expect(await page.getByTestId('stop').isDisabled()).toBe(true);
    expect(await page.getByTestId('send').isEnabled()).toBe(true);

    // A reload rejoins the same session and replays it to the same state.
    await page.reload();
    expect(await text(page, 'session')).toBe(sessionId);
    await waitForStatus(page, 'completed', 5000);
    expect(await text(page, 'transcript')).toContain('hello again');
    await page.close();
  });

  it("shows a running command's output under its call while it runs, and keeps what it printed after the stop", async () => {
    const page = await browser.context.newPage();
    try {
      await page.goto(`${server.url}?session=e2e-live-output`);
      await page.getByTestId('prompt').fill('shell');
      await page.getByTestId('send').click();
      // The shell prints its first line, then waits on two 30 s sleeps: the line is on the page
      // while the command still runs (its call running, its processes alive).
      await page.waitForFunction(() => document.querySelector('.tool.running [data-testid="tool-output"]')?.textContent?.includes('two sleepers started'), null, { timeout: 15_000 });
      expect(toolTree(server.pid)).toHaveLength(3);
      expect(await text(page, 'status')).toBe('running');
      expect(await page.locator('.tool.running').count()).toBe(1);
      await page.getByTestId('stop').click();
      await waitForStatus(page, 'cancelled', 5000);
      // What the command printed before the stop stays under the aborted call, said as such.
      expect(await page.locator('.tool.aborted [data-testid="tool-output"]').textContent()).toBe('two sleepers started, 30 s\n');
      expect(await page.locator('.tool.aborted .live-label').textContent()).toBe('output before the stop:');
    } finally {
      // A failure above must not leave the shell running under the next tests.
      await server.post('/api/sessions/e2e-live-output/stop', {});
      await eventually(() => toolTree(server.pid).length === 0, 10_000, 'the shell stopped');
      await page.close();
    }
  });

  it('shows a question with an answer box; the answer completes the turn', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}?session=e2e-ask`);
    expect(await text(page, 'session')).toBe('e2e-ask');
    await page.getByTestId('prompt').fill('ask me');
    await page.getByTestId('send').click();
    await page.getByTestId('question').waitFor({ timeout: 10_000 });
    expect(await text(page, 'question')).toContain('Shall I go on?');
    await page.getByTestId('answer').fill('yes please');
    await page.getByTestId('answer-send').click();
    await waitForStatus(page, 'completed', 10_000);
    expect(await text(page, 'transcript')).toContain('answered: yes please');
    await page.close();
  });
  it('Stop while a question waits: the answer box goes, the turn is cancelled', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}?session=e2e-ask-stop`);
    await page.getByTestId('prompt').fill('ask first');
    await page.getByTestId('send').click();
    await page.getByTestId('question').waitFor({ timeout: 10_000 });
    await page.getByTestId('stop').click();
    await waitForStatus(page, 'cancelled', 1000);
    expect(await page.getByTestId('question').count()).toBe(0);
    expect(await page.getByTestId('answer').count()).toBe(0);
    expect(await text(page, 'report')).toMatch(/1 questions/);
    await page.close();
  });

  it('Stop pressed before the Send has reached the server: the turn starts cancelled and nothing of it runs', async () => {
    const page = await browser.context.newPage();
    // Hold the page's POST /turns until the Stop has been answered.
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let posted!: (turnId: string) => void;
    const sent = new Promise<string>((resolve) => { posted = resolve; });
    await page.route('**/api/sessions/*/turns', async (route) => {
      posted(JSON.parse(route.request().postData()!).turnId);
      await held;
      await route.continue();
    });
    try {
      await page.goto(`${server.url}?session=e2e-early-stop`);
      await page.getByTestId('prompt').fill('shell');
      await page.getByTestId('send').click();
      const turnId = await sent;
      expect(turnId).toMatch(/^turn-[0-9a-f]{32}$/);
      expect(await page.getByTestId('stop').isEnabled()).toBe(true);
      const stopAnswer = page.waitForResponse((r) => r.url().endsWith('/stop'));
      await page.getByTestId('stop').click();
      expect(await (await stopAnswer).json()).toMatchObject({ outcome: 'pending', turnId });
      expect(await text(page, 'status')).toBe('cancelling');
      release();
      await waitForStatus(page, 'cancelled', 5000);
      const entries = (await server.get('/api/sessions/e2e-early-stop/history')).body.entries;
      expect(entries.map((e: any) => e.type)).not.toContain('tool_call');
      expect(entries.filter((e: any) => e.type === 'status').at(-1)).toMatchObject({ turnId, status: 'cancelled', reason: 'cancel.user' });
      expect(toolTree(server.pid)).toEqual([]);
    } finally {
      release();
      await page.close();
    }
  });

  it('with a token: the page takes it from the printed URL, hides it, and sends it on every request', async () => {
    const secured = await ServerProcess.start(['--token', 'e2e-token-0123456789abcdef']);
    const page = await browser.context.newPage();
    try {
      expect(secured.url).toMatch(/#token=e2e-token-0123456789abcdef$/);
      await page.goto(`${secured.url.replace('/#', '/?session=e2e-secured#')}`);
      expect(page.url()).toBe(secured.url.replace(/\/#.*$/, '/?session=e2e-secured'));
      await page.getByTestId('prompt').fill('hello with a token');
      await page.getByTestId('send').click();
      await waitForStatus(page, 'completed', 20_000);
      // A reload (no token in the URL any more) keeps working: the tab kept it.
      await page.reload();
      await waitForStatus(page, 'completed', 5000);
      expect(await text(page, 'transcript')).toContain('hello with a token');
      expect(await page.locator('#error').isHidden()).toBe(true);
    } finally {
      await page.close();
      expect((await secured.terminate()).code).toBe(0);
    }
  });

  it('a dropped event stream reconnects with Last-Event-ID: the reply arrives whole, no token twice', async () => {
    // The page talks to the server through a TCP proxy whose connections the test can cut.
    const proxy = await TcpProxy.start(Number(new URL(server.url).port));
    const page = await browser.context.newPage();
    try {
      await page.goto(`http://127.0.0.1:${proxy.port}/?session=e2e-drop`);
      await page.getByTestId('prompt').fill('tell me something');
      await page.getByTestId('send').click();
      await page.waitForFunction(() => (document.querySelector('.say')?.textContent?.length ?? 0) > 10, null, { timeout: 10_000 });
      const before = (await page.locator('.say').textContent())!.length;
      proxy.cut();
      await waitForStatus(page, 'completed', 20_000);
      const reply = (await server.get('/api/sessions/e2e-drop/history')).body.entries.filter((e: any) => e.type === 'say').map((e: any) => e.text).join('');
      expect(reply.length).toBeGreaterThan(before);
      expect(await page.locator('.say').textContent()).toBe(reply);
      expect(proxy.connections).toBeGreaterThanOrEqual(2);
    } finally {
      await page.close();
      await proxy.close();
    }
  });
});

/** A TCP proxy to 127.0.0.1:`port`; `cut()` drops every connection open now (new ones still pass). */
