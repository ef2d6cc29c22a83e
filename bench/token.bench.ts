// T1, T2: what a turn pays for having a token at all. Every batch leaves a result checked at the
// end, so the JIT cannot drop the work.
import { TurnRegistry, type CancelToken } from '../src/index.js';
import { tokenFromHandle } from '../workers/runtime.js';
import { assertNothingLive, compare, median, sampleRounds, suiteOf, withTurn, type SuiteContext } from './harness.js';

const BATCH = 1000;
const rounds = (ctx: SuiteContext) => (ctx.quick ? { rounds: 3, timeMs: 15, warmupMs: 10 } : { rounds: 12, timeMs: 120, warmupMs: 250 });
const batch = (name: string, one: () => void) => ({ name, ops: 100, fn: () => { for (let i = 0; i < 100; i++) one(); } });

async function cycleCost(ctx: SuiteContext) {
  const registry = new TurnRegistry();
  let last: CancelToken | undefined;
  let controller: AbortController | undefined;
  const s = await sampleRounds('T1', [
    batch('cycle', () => { last = registry.beginTurn('t1'); registry.endTurn('t1', last); }),
    batch('controller', () => { controller = new AbortController(); }),
    batch('cycle+handle', () => { last = registry.beginTurn('t1h'); void last.handle; registry.endTurn('t1h', last); }),
  ], rounds(ctx), ctx);
  if (last?.retired !== true || controller?.signal.aborted !== false) throw new Error('T1: the measured work did not happen');
  assertNothingLive(registry, 'T1');
  return compare({ id: 'T1', metric: 'beginTurn+endTurn cycle', unit: 'ns', extra: { goal: '≤ 2000 ns', withHandleNs: median(s['cycle+handle']!) } },
    s.cycle!, ['new AbortController()', s.controller!]);
}

async function checkCost(ctx: SuiteContext) {
  const registry = new TurnRegistry();
  const row = await withTurn(registry, 't2', async ({ handle, handle: { index } }) => {
    const worker = tokenFromHandle(handle);
    // The raw side reads a buffer of its own holding the same running word: the same load, no library.
    const raw = new Int32Array(new SharedArrayBuffer(handle.buffer.byteLength));
    const running = (raw[index] = Atomics.load(new Int32Array(handle.buffer), index));
    let hits = 0;
    // Loops written out, not through `batch`: an un-inlined closure call would flatten a ~1 ns ratio.
    const s = await sampleRounds('T2', [
      { name: 'isCancelled', ops: BATCH, fn: () => { for (let i = 0; i < BATCH; i++) if (worker.isCancelled()) hits++; } },
      { name: 'load', ops: BATCH, fn: () => { for (let i = 0; i < BATCH; i++) if (Atomics.load(raw, index) !== running) hits++; } },
    ], rounds(ctx), ctx);
    if (hits !== 0) throw new Error(`T2: a running token read as cancelled ${hits} times`);
    return compare({ id: 'T2', metric: 'worker isCancelled() check', unit: 'ns', extra: { goal: '≤ 1.5×' } }, s.isCancelled!, ['raw Atomics.load', s.load!]);
  });
  assertNothingLive(registry, 'T2');
  return row;
}

export const suite = suiteOf({ T1: cycleCost, T2: checkCost });
