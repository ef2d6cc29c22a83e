/**
 * The wire's payload arrays stay packed. The first task a worker thread gets carries the slab's
 * buffer, appended to its payload; if that append left holes, V8 would make every later payload
 * array of the same literal holey (its allocation site learns the elements kind) and clone each in
 * its slow, sparse format, so every task of every pool in the process would pay for the few that
 * carried buffers. Shown with V8's own view of the arrays, in a child run with
 * `--allow-natives-syntax` (the test cannot read elements kinds otherwise). And every place after
 * the task is a small integer V8 keeps unboxed (a Smi): a heap number there would be one more
 * allocation a task on each thread.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/pool/payload-shape.mjs', import.meta.url));

it('payloads made after others carried slab buffers are not holey, and every place is a small integer', async () => {
  const { stdout } = await run(process.execPath, ['--allow-natives-syntax', fixture], { timeout: 60_000 });
  const { seen, holey, boxed, children } = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, number>;
  expect(seen).toBe(100); // the balancer saw every payload of the counted batch
  expect(holey).toBe(0);
  expect(boxed).toBe(0); // the packed slot of before: 100 of 100, a double past 2^31
  expect(children).toBe(50); // half of them a child token's, with its root's places
}, 70_000);

it('every place a payload can carry stays below 2^30, where V8 keeps a number unboxed on any build', async () => {
  const { MAX_SLOTS_PER_SLAB } = await import('../dist/src/token/slab.js');
  const { FIRST_SLOT, GENERATION_MODULO } = await import('../dist/src/token/slot.js');
  // An index is below its slab's last cell, a generation below the modulo; V8's smallest Smi range
  // (with pointer compression) ends at 2^30 - 1. Slab ids count up from 1, a slab at a time.
  expect(MAX_SLOTS_PER_SLAB + FIRST_SLOT - 1).toBeLessThan(2 ** 30);
  expect(GENERATION_MODULO - 1).toBeLessThan(2 ** 30);
});
