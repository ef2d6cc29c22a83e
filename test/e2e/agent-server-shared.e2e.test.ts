/**
 * Two agent servers with the history in PostgreSQL (`--postgres`) and the fleet and event streams
 * in Redis, behind a round-robin proxy (no sticky sessions): every request of the page may land
 * on either instance. Send lands on A, Stop on B, the next Send on B, whose model's prompt holds
 * the stopped turn's aborted output and marker; a question asked on A is answered through B; the
 * page's event stream, cut mid-turn, resumes on the other instance without a gap or a repeat.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { liveDescendants } from '../support/leaks.js';
import { launch, type Browser } from './browser.js';
import { keysOf, REDIS_URL, removeKeys, uniquePrefix } from './fleet-keys.js';
import { dropSchema, POSTGRES_URL, schemaExists, uniqueSchema } from './pg-schema.js';
import { RoundRobin } from './round-robin.js';
import { ServerProcess } from './server-process.js';

const prefix = uniquePrefix('shared');
const schema = uniqueSchema('e2e');
const dir = mkdtempSync(join(tmpdir(), 'fullstop-e2e-prompts-'));
/** What each instance's scripted model was prompted with, one JSON line per call. */
const prompts = (node: string) => join(dir, `${node}.jsonl`);
let a: ServerProcess;
let b: ServerProcess;
let proxy: RoundRobin;
let browser: Browser;
const A = 0;
const B = 1;

beforeAll(async () => {
  const args = (node: string) => ['--redis', REDIS_URL, '--fleet-prefix', prefix, '--postgres', POSTGRES_URL, '--pg-schema', schema,
    '--node-id', node, '--allowed-hosts', '127.0.0.1'];
  // One first, so the schema is created by one instance (PgLedger.open is safe at once too, but
  // that is its own spec's business).
  a = await ServerProcess.start(args('A'), { SCRIPTED_MODEL_PROMPT_LOG: prompts('A') });
  b = await ServerProcess.start(args('B'), { SCRIPTED_MODEL_PROMPT_LOG: prompts('B') });
  browser = await launch();
  proxy = await RoundRobin.start([a.url, b.url]);
});
afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  const exits = await Promise.all([a, b].filter(Boolean).map((s) => s.terminate()));
  for (const exit of exits) expect(exit.code).toBe(0);
  await removeKeys(prefix);
  expect(await keysOf(prefix)).toEqual([]);
  await dropSchema(schema);
  expect(await schemaExists(schema)).toBe(false);
  rmSync(dir, { recursive: true, force: true });
  expect(liveDescendants()).toEqual([]);
});

const text = (page: Page, id: string) => page.getByTestId(id).textContent();
const status = (page: Page, value: string, ms: number) =>
  page.waitForFunction((s) => document.querySelector('[data-testid="status"]')?.textContent === s, value, { timeout: ms });
const lastPrompt = (node: string): { role: string; content: unknown }[] =>
  JSON.parse(readFileSync(prompts(node), 'utf8').trim().split('\n').at(-1)!).prompt;

describe('the agent page behind a round-robin balancer (history in PostgreSQL, which the event streams read)', () => {
  it('Send on A, Stop on B, next Send on B with the stopped turn in its prompt; a question of A answered through B', async () => {
    const sessionId = 'e2e-shared';
    const page = await browser.context.newPage();
    try {
      await page.goto(`${proxy.url}?session=${sessionId}`);
      const stream = await proxy.request((r) => r.path.endsWith('/events'));
      await proxy.request((r) => r.path === '/healthz');
      expect(await text(page, 'status')).toBe('idle');

      // 1. Send lands on A; the page (its stream on whichever instance) follows the turn.
      await proxy.align(A);
      await page.getByTestId('prompt').fill('shell');
      let from = proxy.log.length;
      await page.getByTestId('send').click();
      expect(await proxy.request((r) => r.path.endsWith('/turns'), from)).toMatchObject({ method: 'POST', upstream: A });
      await page.waitForFunction(() => document.querySelector('.tool.running')?.textContent?.startsWith('shell'), null, { timeout: 15_000 });
      expect(await page.locator('#node').textContent()).toBe('A');

      // 2. Stop lands on B: the fleet stops A's turn, and the page shows it.
      from = proxy.log.length;
      const stopAnswer = page.waitForResponse((r) => r.url().endsWith('/stop'));
      await page.getByTestId('stop').click();
      expect(await proxy.request((r) => r.path.endsWith('/stop'), from)).toMatchObject({ method: 'POST', upstream: B });
      expect(await (await stopAnswer).json()).toMatchObject({ outcome: 'stopped', node: 'A', sessionId });
      await status(page, 'cancelled', 5000);
      await page.getByTestId('report').waitFor({ state: 'visible', timeout: 2000 });

      // 3. The next Send lands on B. Its stream is cut mid-reply and resumes on the other instance
      // than the one that served it (Last-Event-ID is a seq of the history every instance reads).
      await proxy.align(B);
      await page.getByTestId('prompt').fill('and now?');
      from = proxy.log.length;
      await page.getByTestId('send').click();
      expect(await proxy.request((r) => r.path.endsWith('/turns'), from)).toMatchObject({ method: 'POST', upstream: B });
      await page.waitForFunction(() => document.querySelectorAll('.say').length === 2 && document.querySelectorAll('.say')[1].textContent!.length > 10, null, { timeout: 10_000 });
      await proxy.align(1 - stream.upstream);
      from = proxy.log.length;
      proxy.cutStreams();
      expect(await proxy.request((r) => r.path.endsWith('/events'), from)).toMatchObject({ upstream: 1 - stream.upstream });
      await status(page, 'completed', 20_000);
      expect(await page.locator('#node').textContent()).toBe('B');
      const history = (await a.get(`/api/sessions/${sessionId}/history`)).body.entries as any[];
      const second = history.find((e) => e.type === 'turn_started' && e.input === 'and now?')!.turnId;
      const reply = history.filter((e) => e.type === 'say' && e.turnId === second).map((e) => e.text).join('');
      expect(await page.locator('.say').nth(1).textContent()).toBe(reply);

      // B's model was prompted with what the stop on A recorded: the aborted call and the marker.
      const prompt = JSON.stringify(lastPrompt('B'));
      expect(prompt).toContain('"toolName":"shell"');
      expect(prompt).toMatch(/aborted by user after \d+\.\ds/);
      expect(prompt).toContain('The user stopped this turn on purpose');
      // ...and what the command had printed before the stop (its live output, kept as partial).
      expect(prompt).toContain('two sleepers started, 30 s');
      expect(prompt).toContain('and now?');

      // 4. A question asked on A is answered through B.
      await proxy.align(A);
      await page.getByTestId('prompt').fill('ask');
      from = proxy.log.length;
      await page.getByTestId('send').click();
      expect(await proxy.request((r) => r.path.endsWith('/turns'), from)).toMatchObject({ upstream: A });
      await page.getByTestId('question').waitFor({ state: 'visible', timeout: 15_000 });
      await proxy.align(B);
      await page.getByTestId('answer').fill('yes, go on');
      from = proxy.log.length;
      const answered = page.waitForResponse((r) => r.url().endsWith('/answer'));
      await page.getByTestId('answer-send').click();
      expect(await proxy.request((r) => r.path.endsWith('/answer'), from)).toMatchObject({ method: 'POST', upstream: B });
      expect(await (await answered).json()).toMatchObject({ accepted: true, outcome: 'accepted', node: 'A' });
      await status(page, 'completed', 20_000);
      expect(await page.locator('.say').last().textContent()).toContain('yes, go on');
    } finally {
      await page.close();
    }
  });
});
