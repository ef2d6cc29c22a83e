/**
 * Token costs (issue #2): what a turn pays for having a token at all.
 *
 * T1  `beginTurn` + `endTurn`, one cycle, vs `new AbortController()` — what a turn pays today
 *     for its cancel state (goal ≤ 2 µs a cycle).
 * T2  `tokenFromHandle(h).isCancelled()` on a token made once, vs a raw `Atomics.load` on an
 *     Int32Array over a SharedArrayBuffer — the check a worker makes every ~1000 iterations
 *     (goal ≤ 1.5×).
 *
 * Both are nanosecond operations, so one sample is a batch (one timer read costs ~30–60 ns) and
 * is divided by its size. Every batch folds its results into a value that is checked at the end,
 * so the JIT cannot drop the work; fullstop and its baseline are sampled in interleaved rounds.
 */

import { TurnRegistry, type CancelToken } from '../src/index.js';
import { tokenFromHandle } from '../workers/runtime.js';
import { compare, sampleInterleaved, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';

const T1_BATCH = 100;
const T2_BATCH = 1000;

export const suite: Suite = {
  name: 'token',
  ids: ['T1', 'T2'],
  async run(ctx) {
    const wants = ctx.wants ?? (() => true);
    const rows: BenchResult[] = [];
    if (wants('T1')) rows.push(await cycleCost(ctx));
    if (wants('T2')) rows.push(await checkCost(ctx));
    return rows;
  },
};

function rounds(ctx: SuiteContext) {
  return ctx.quick ? { rounds: 3, timeMs: 30, warmupMs: 30 } : { rounds: 10, timeMs: 120, warmupMs: 150 };
}

async function cycleCost(ctx: SuiteContext): Promise<BenchResult> {
  ctx.progress('T1 beginTurn+endTurn vs new AbortController()');
  const registry = new TurnRegistry();
  let last: CancelToken | undefined;
  let controller: AbortController | undefined;
  const samples = await sampleInterleaved(
    [
      {
        name: 'cycle',
        ops: T1_BATCH,
        fn: () => {
          for (let i = 0; i < T1_BATCH; i++) {
            last = registry.beginTurn('t1');
            registry.endTurn('t1', last);
          }
        },
      },
      {
        name: 'controller',
        ops: T1_BATCH,
        fn: () => {
          for (let i = 0; i < T1_BATCH; i++) controller = new AbortController();
        },
      },
      // Not the headline: the same cycle for a turn whose handle leaves the thread (the bridge's
      // Atomics.waitAsync is armed, then released at retire), i.e. every turn that uses a pool.
      {
        name: 'cycle+handle',
        ops: T1_BATCH,
        fn: () => {
          for (let i = 0; i < T1_BATCH; i++) {
            last = registry.beginTurn('t1h');
            void last.handle;
            registry.endTurn('t1h', last);
          }
        },
      },
    ],
    rounds(ctx),
  );
  if (last?.retired !== true || controller?.signal.aborted !== false) throw new Error('T1: the measured work did not happen');
  assertNothingLive(registry, 'T1');
  const withHandle = samples.get('cycle+handle')!;
  return compare(
    {
      id: 'T1', metric: 'beginTurn+endTurn cycle', unit: 'ns', better: 'lower',
      extra: { goal: '≤ 2000 ns', withHandleNs: summarize(withHandle).median, batch: T1_BATCH },
    },
    samples.get('cycle')!,
    'new AbortController()',
    samples.get('controller')!,
  );
}

async function checkCost(ctx: SuiteContext): Promise<BenchResult> {
  ctx.progress('T2 tokenFromHandle(h).isCancelled() vs raw Atomics.load');
  const registry = new TurnRegistry();
  const token = registry.beginTurn('t2');
  try {
    const handle = token.handle;
    const worker = tokenFromHandle(handle);
    // The raw side gets a buffer of its own with a running word in it: the same load, no library.
    const raw = new Int32Array(new SharedArrayBuffer(handle.buffer.byteLength));
    const index = handle.index;
    const running = Atomics.load(new Int32Array(handle.buffer), index);
    raw[index] = running;
    let hits = 0;
    const samples = await sampleInterleaved(
      [
        {
          name: 'isCancelled',
          ops: T2_BATCH,
          fn: () => {
            for (let i = 0; i < T2_BATCH; i++) if (worker.isCancelled()) hits++;
          },
        },
        {
          name: 'load',
          ops: T2_BATCH,
          fn: () => {
            for (let i = 0; i < T2_BATCH; i++) if (Atomics.load(raw, index) !== running) hits++;
          },
        },
        // Not the headline: making the WorkerToken on every check (validating the handle and a
        // new Int32Array view) — what code that does not keep its token pays.
        {
          name: 'fromHandle',
          ops: T2_BATCH,
          fn: () => {
            for (let i = 0; i < T2_BATCH; i++) if (tokenFromHandle(handle).isCancelled()) hits++;
          },
        },
      ],
      rounds(ctx),
    );
    if (hits !== 0) throw new Error(`T2: a running token read as cancelled ${hits} times`);
    return compare(
      {
        id: 'T2', metric: 'worker isCancelled() check', unit: 'ns', better: 'lower',
        extra: { goal: '≤ 1.5×', fromHandleEachCallNs: summarize(samples.get('fromHandle')!).median, batch: T2_BATCH },
      },
      samples.get('isCancelled')!,
      'raw Atomics.load',
      samples.get('load')!,
    );
  } finally {
    registry.endTurn('t2', token);
    assertNothingLive(registry, 'T2');
  }
}

/** A cycle that leaked a slot or a bridge would make its figure a lie (and is a bug to report). */
function assertNothingLive(registry: TurnRegistry, id: string): void {
  const stats = registry.stats();
  if (stats.liveTokens !== 0 || stats.liveSlots !== 0 || stats.liveBridges !== 0) {
    throw new Error(`${id}: the registry still holds ${JSON.stringify(stats)} after every turn ended`);
  }
}
