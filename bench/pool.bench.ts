// P1–P3: how fast a TurnPool task stops, and how fast a worker's cancel reaches main, against raw floors (docs/benchmarks.md). Every side
// runs on the one thread of a 1-thread TurnPool, the floors as plain tasks: a thread idle for longer wakes slower, so no side may have its own.
import { TurnPool, TurnRegistry } from '../src/index.js';
import { flagCells, GO, now, settle, started, TASKS, usSince } from './handshake.js';
import { assertNothingLive, compare, samplePairs, suiteOf, withTurn, type SuiteContext } from './harness.js';

const [registry, flags] = [new TurnRegistry(), flagCells()];
let pool: TurnPool;
let [turns, sink] = [0, 0];
const pairCounts = (ctx: SuiteContext, full = 300) => (ctx.quick ? { pairs: 12, warmup: 3 } : { pairs: full, warmup: 20 });
const head = (id: string, metric: string, extra: Record<string, unknown>) => ({ id, metric, unit: 'µs', extra });
const aborted = (signal: AbortSignal) => new Promise<bigint>((r) => signal.addEventListener('abort', () => r(now()), { once: true }));

/** One task under a fresh turn; once it is ready (and settled), main stamps and cancels it: µs to the task's own stamp. */
const cancelTask = (name: string) => withTurn(registry, `lab-${++turns}`, async (token) => {
  const { running } = await started(flags, name, () => pool.run<bigint | [bigint, number]>({ flags }, { token, name }));
  await settle();
  const t0 = now();
  token.cancel();
  const value = await running;
  if (typeof value !== 'bigint') sink ^= value[1];
  return usSince(t0, typeof value === 'bigint' ? value : value[0]);
});

/** P1's and P2's floors: a plain task waits for (or spins on) GO; once it is ready, main stamps and flips GO. µs to its stamp; void if it woke from no block. */
const flip = (name: 'rawWait' | 'rawPoll', shape: boolean) => async () => {
  Atomics.store(flags, GO, 0);
  const { running } = await started(flags, name, () => pool.run<[bigint, number]>({ flags, shape }, { name }));
  await settle();
  const t0 = now();
  Atomics.store(flags, GO, 1);
  Atomics.notify(flags, GO);
  const [at, x] = await running;
  sink ^= x;
  return at < 0n ? undefined : usSince(t0, at);
};

/** P3's floors: a plain task stores and notifies GO; µs from its stamp to that of what `prepare` (run before it, as fullstop's listener is) returned. */
const waitAsyncFloor = (prepare: () => () => bigint | Promise<bigint>) => async () => {
  Atomics.store(flags, GO, 0);
  const onWake = prepare();
  const wait = Atomics.waitAsync(flags, GO, 0);
  const woke = wait.async ? wait.value.then(onWake) : undefined;
  const at = await pool.run<bigint>({ flags }, { name: 'rawTrip' });
  return woke === undefined ? undefined : usSince(at, await woke);
};

export const suite = suiteOf({
  async 'P1 P1-plain'(ctx) {
    const { samples: s, voided } = await samplePairs('P1', pairCounts(ctx), { fullstop: () => cancelTask('sleeper'),
      plain: () => cancelTask('sleepsUnlessCancelled'), raw: flip('rawWait', false), shape: flip('rawWait', true) }, ctx);
    return [compare(head('P1', 'cancel → task in sleep() wakes', { goal: 'shape ≤ 1.25×', voided }), s.fullstop, ['raw Atomics.notify → wait', s.raw],
      { shape: ['raw + throw a pre-built Error', s.shape] }),
    compare(head('P1-plain', 'cancel → sleepUnlessCancelled() returns', { goal: '≤ 1.25×', voided }), s.plain, ['raw Atomics.notify → wait', s.raw])];
  },
  async 'P2 P2-plain'(ctx) {
    const { samples: s, voided } = await samplePairs('P2', pairCounts(ctx), { fullstop: () => cancelTask('pollsEveryIteration'),
      plain: () => cancelTask('pollsIsCancelled'), raw: flip('rawPoll', false), shape: flip('rawPoll', true) }, ctx);
    return [compare(head('P2', 'cancel → busy checkCancelled() throws', { goal: 'shape ≤ 1.25×', voided, sink: sink & 1 }), s.fullstop, ['raw Atomics.load poll', s.raw],
      { shape: ['raw poll + throw a pre-built Error', s.shape] }),
    compare(head('P2-plain', 'cancel → busy isCancelled() loop ends', { goal: '≤ 1.25×', voided, sink: sink & 1 }), s.plain, ['raw Atomics.load poll', s.raw])];
  },
  async P3(ctx) {
    const reason = new Error('cancelled');
    const { samples: s, voided } = await samplePairs('P3', pairCounts(ctx, 200), {
      // fullstop: the task trips its turn, µs from its stamp to main's signal listener, added before the task runs as the floors'
      // `prepare` is. The task lingers after its trip: on a loaded host the default grace could hard-stop it first.
      fullstop: () => withTurn(registry, 'p3', async (token) => {
        const fired = aborted(token.signal);
        const at = await pool.run<bigint>({ flags }, { token, name: 'trips', graceMs: 10_000 });
        return usSince(at, await fired);
      }),
      raw: waitAsyncFloor(() => now),
      shape: waitAsyncFloor(() => {
        const controller = new AbortController();
        const fired = aborted(controller.signal);
        return () => (controller.abort(reason), fired);
      }),
    }, ctx);
    return compare(head('P3', 'cancelTurn() in worker → main signal aborts', { goal: 'shape ≤ 1.1×', voided }), s.fullstop, ['raw store+notify → waitAsync', s.raw],
      { shape: ['raw waitAsync + AbortController.abort', s.shape] });
  },
}, async (_, rows) => {
  pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  try {
    return await rows();
  } finally {
    await pool.destroy();
    assertNothingLive(registry, 'P1–P3');
  }
});
