/**
 * What a turn pays for having a token at all.
 *
 * T1  `beginTurn` + `endTurn`, one cycle, vs `new AbortController()` (goal ≤ 2 µs a cycle).
 *     Extra: the cycle of a turn whose `handle` leaves the thread (the bridge's waitAsync is armed).
 * T2  `tokenFromHandle(h).isCancelled()` on a token made once vs a raw `Atomics.load` (goal ≤ 1.5×).
 *     Extra: making the WorkerToken on every check.
 *
 * Nanosecond operations: one call is a batch, divided by its size. Every batch leaves a result
 * that is checked at the end, so the JIT cannot drop the work.
 */

import { TurnRegistry, type CancelToken } from '../src/index.js';
import { tokenFromHandle } from '../workers/runtime.js';
import { assertNothingLive, compare, sampleRounds, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';

const BATCH = 1000;

export const suite: Suite = {
  name: 'token',
  ids: ['T1', 'T2'],
  async run(ctx) {
    const rows: BenchResult[] = [];
    if (ctx.wants?.('T1') !== false) rows.push(await cycleCost(ctx));
    if (ctx.wants?.('T2') !== false) rows.push(await checkCost(ctx));
    return rows;
  },
};

const rounds = (ctx: SuiteContext) => (ctx.quick ? { rounds: 3, timeMs: 15 } : { rounds: 12, timeMs: 120 });
const batch = (name: string, ops: number, one: () => void) => ({
  name, ops, fn: () => { for (let i = 0; i < ops; i++) one(); },
});

async function cycleCost(ctx: SuiteContext): Promise<BenchResult> {
  ctx.progress('T1 beginTurn+endTurn vs new AbortController()');
  const registry = new TurnRegistry();
  let last: CancelToken | undefined;
  let controller: AbortController | undefined;
  const samples = await sampleRounds([
    batch('cycle', 100, () => { last = registry.beginTurn('t1'); registry.endTurn('t1', last); }),
    batch('controller', 100, () => { controller = new AbortController(); }),
    batch('cycle+handle', 100, () => { last = registry.beginTurn('t1h'); void last.handle; registry.endTurn('t1h', last); }),
  ], rounds(ctx));
  if (last?.retired !== true || controller?.signal.aborted !== false) throw new Error('T1: the measured work did not happen');
  assertNothingLive(registry, 'T1');
  return compare(
    { id: 'T1', metric: 'beginTurn+endTurn cycle', unit: 'ns', better: 'lower',
      extra: { goal: '≤ 2000 ns', withHandleNs: summarize(samples.get('cycle+handle')!).median } },
    samples.get('cycle')!, 'new AbortController()', samples.get('controller')!, { paired: true },
  );
}

async function checkCost(ctx: SuiteContext): Promise<BenchResult> {
  ctx.progress('T2 isCancelled() vs raw Atomics.load');
  const registry = new TurnRegistry();
  const token = registry.beginTurn('t2');
  try {
    const handle = token.handle;
    const worker = tokenFromHandle(handle);
    // The raw side reads a buffer of its own holding the same running word: the same load, no library.
    const raw = new Int32Array(new SharedArrayBuffer(handle.buffer.byteLength));
    const index = handle.index;
    const running = (raw[index] = Atomics.load(new Int32Array(handle.buffer), index));
    let hits = 0;
    const samples = await sampleRounds([
      // Loops written out, not through `batch`: a shared loop calling a closure would add an
      // un-inlined call to a ~1 ns operation and flatten the ratio.
      { name: 'isCancelled', ops: BATCH, fn: () => { for (let i = 0; i < BATCH; i++) if (worker.isCancelled()) hits++; } },
      { name: 'load', ops: BATCH, fn: () => { for (let i = 0; i < BATCH; i++) if (Atomics.load(raw, index) !== running) hits++; } },
      { name: 'fromHandle', ops: BATCH, fn: () => { for (let i = 0; i < BATCH; i++) if (tokenFromHandle(handle).isCancelled()) hits++; } },
    ], rounds(ctx));
    if (hits !== 0) throw new Error(`T2: a running token read as cancelled ${hits} times`);
    return compare(
      { id: 'T2', metric: 'worker isCancelled() check', unit: 'ns', better: 'lower',
        extra: { goal: '≤ 1.5×', fromHandleEachCallNs: summarize(samples.get('fromHandle')!).median } },
      samples.get('isCancelled')!, 'raw Atomics.load', samples.get('load')!, { paired: true },
    );
  } finally {
    registry.endTurn('t2', token);
    assertNothingLive(registry, 'T2');
  }
}
