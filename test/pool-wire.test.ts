/**
 * The wire's payload arrays stay packed. The first task a worker thread gets carries the slab's
 * buffer, appended to its payload; if that append left holes, V8 would make every later payload
 * array of the same literal holey (its allocation site learns the elements kind) and clone each in
 * its slow, sparse format, so every task of every pool in the process would pay for the few that
 * carried buffers. Shown with V8's own view of the arrays, in a child run with
 * `--allow-natives-syntax` (the test cannot read elements kinds otherwise).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/pool/payload-shape.mjs', import.meta.url));

it('payloads made after others carried slab buffers are not holey', async () => {
  const { stdout } = await run(process.execPath, ['--allow-natives-syntax', fixture], { timeout: 60_000 });
  const { seen, holey } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { seen: number; holey: number };
  expect(seen).toBe(100); // the balancer saw every payload of the counted batch
  expect(holey).toBe(0);
}, 70_000);
