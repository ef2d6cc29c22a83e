/**
 * The wire's payload arrays stay packed. The first task a worker thread gets carries the slab's
 * buffer, appended to its payload; if that append left holes, V8 would make every later payload
 * array of the same literal holey (its allocation site learns the elements kind) and clone each in
 * its slow, sparse format, so every task of every pool in the process would pay for the few that
 * carried buffers. Shown with V8's own view of the arrays, in a child run with
 * `--allow-natives-syntax` (the test cannot read elements kinds otherwise). And the one number a
 * payload packs each slot into gives back every index and generation exactly.
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

it('a packed slot gives back every index and generation a slab can hold, exactly', async () => {
  const { packSlot, indexOfSlot, generationOfSlot } = await import('../dist/src/pool/protocol.js');
  const { MAX_SLOTS_PER_SLAB } = await import('../dist/src/token/slab.js');
  const { FIRST_SLOT, GENERATION_MODULO } = await import('../dist/src/token/slot.js');
  const lastIndex = MAX_SLOTS_PER_SLAB + FIRST_SLOT - 1;
  for (const index of [FIRST_SLOT, FIRST_SLOT + 1, 1000, lastIndex - 1, lastIndex]) {
    for (const generation of [0, 1, 12345, GENERATION_MODULO - 2, GENERATION_MODULO - 1]) {
      const slot = packSlot(index, generation);
      expect(Number.isSafeInteger(slot)).toBe(true);
      expect([indexOfSlot(slot), generationOfSlot(slot)]).toEqual([index, generation]);
    }
  }
});
