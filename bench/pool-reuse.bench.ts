// P4: cancel → the next turn's task result, vs Piscina's own abort (terminate + respawn). P5*:
// throughput against raw Piscina in rounds (docs/benchmarks.md).
import { Piscina } from 'piscina';
import { isCancelledError, TurnPool, TurnRegistry, type CancelledError, type CancelToken } from '../src/index.js';
import { flagCells, now, settle, started, usSince } from './handshake.js';
import { assertNothingLive, compare, samplePairs, suiteOf, withTurn, type BenchResult, type SuiteContext } from './harness.js';

const TASKS = new URL('./workers/tasks.js', import.meta.url).href;
const [IN_FLIGHT, registry] = [100, new TurnRegistry()];

async function stopThenNext(ctx: SuiteContext): Promise<BenchResult> {
  const options = { filename: TASKS, minThreads: 1, maxThreads: 1 };
  const [pool, raw, flags] = [new TurnPool(options), new Piscina(options), flagCells()];
  /** Once `sleeper` is ready, `stop` it: µs to the result of the task `stop` submits (7), once the sleeper ended as `expected`. */
  const stopAndNext = async (sleeper: () => Promise<unknown>, stop: () => Promise<number>, expected: [string, (e?: Error) => boolean]) => {
    const { running } = await started(flags, 'P4 sleeper', sleeper);
    const stopped = running.then(() => undefined, (e: unknown) => e as Error);
    await settle();
    const t0 = now();
    const value = await stop();
    const us = usSince(t0, now());
    if (value !== 7) throw new Error(`P4: the next task returned ${value}`);
    const error = await stopped;
    if (!expected[1](error)) throw new Error(`P4: expected ${expected[0]}, got ${String(error)}`);
    return us;
  };
  try {
    const { samples, voided } = await samplePairs('P4', ctx.quick ? { pairs: 2, warmup: 1 } : { pairs: 30, warmup: 2 }, {
      fullstop: async () => {
        let token = registry.beginTurn('p4');
        try {
          return await stopAndNext(() => pool.run({ flags }, { token, name: 'sleepsUntilStopped' }), () => {
            token.cancel();
            token = registry.beginTurn('p4'); // the next turn retires the stopped one
            return pool.run<number>(7, { token, name: 'trivial' });
          }, ['a cooperative stop', (e) => isCancelledError(e) && !(e as CancelledError).hard]);
        } finally {
          registry.endTurn('p4', token);
        }
      },
      raw: async () => {
        const controller = new AbortController();
        return stopAndNext(() => raw.run({ flags }, { name: 'rawSleeper', signal: controller.signal }),
          () => (controller.abort(), raw.run(7, { name: 'trivial' })), ['an AbortError', (e) => e?.name === 'AbortError']);
      },
    }, ctx);
    const { hardStops, cooperativeStops } = pool.stats();
    if (hardStops !== 0) throw new Error(`P4: ${hardStops} hard stops (every stop should be cooperative)`);
    return compare({ id: 'P4', metric: 'stop → next task completes (1 thread)', unit: 'µs', extra: { goal: '≤ 1/30', voided, cooperativeStops } },
      samples.fullstop, ['piscina abort (terminate + respawn)', samples.raw]);
  } finally {
    await Promise.all([pool.destroy(), raw.destroy()]);
  }
}

/** Tasks/s for `total` tasks with IN_FLIGHT in flight (a completion submits the next). */
async function drive(submit: (i: number) => Promise<unknown>, total: number): Promise<number> {
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    let [submitted, done] = [0, 0];
    const one = (i = submitted++): unknown => submit(i).then((value) => {
      if (value !== i) return reject(new Error(`P5: task ${i} returned ${String(value)}`));
      if (++done === total) resolve();
      else if (submitted < total) one();
    }, reject);
    for (let k = 0; k < Math.min(IN_FLIGHT, total); k++) one();
  });
  return total / ((performance.now() - t0) / 1000);
}

async function throughput(ctx: SuiteContext): Promise<BenchResult[]> {
  const [rounds, total] = ctx.quick ? [2, 900] : [12, 15_000];
  const options = { filename: TASKS, name: 'trivial', minThreads: 2, maxThreads: 2 };
  const four = { ...options, concurrentTasksPerWorker: 4 };
  const pools = { raw: new Piscina(options), pool: new TurnPool(options), raw4: new Piscina(four), pool4: new TurnPool(four) };
  // One round of a variant: `total` tasks (a third in a warm-up round) under one turn. The rounds take the variants in a
  // random order, so none always runs after the same other and collects its garbage; the heap is not collected before a
  // round, which would start each from a state a busy pool is never in (docs/benchmarks.md, "Where P5's time goes").
  const variant = (submit: (i: number, token: CancelToken) => Promise<unknown>) => (warmup: boolean) =>
    withTurn(registry, 'p5', (token) => drive((i) => submit(i, token), warmup ? Math.ceil(total / 3) : total));
  try {
    const { samples: rates } = await samplePairs('P5', { pairs: rounds, warmup: ctx.quick ? 1 : 2, shuffle: true }, {
      raw: variant((i) => pools.raw.run(i)), token: variant((i, token) => pools.pool.run(i, { token })), plain: variant((i) => pools.pool.run(i)),
      raw4: variant((i) => pools.raw4.run(i)), token4: variant((i, token) => pools.pool4.run(i, { token })),
    }, ctx);
    const row = (id: string, metric: string, side: number[], base: number[], perWorker = 1) => compare({ id, metric, unit: 'tasks/s', better: 'higher',
      extra: { goal: '≥ 0.95×', rounds, tasksPerRound: total, inFlight: IN_FLIGHT, threads: 2, concurrentTasksPerWorker: perWorker } },
    side, [`raw Piscina${perWorker > 1 ? `, concurrentTasksPerWorker ${perWorker}` : ''}`, base]);
    return [row('P5', 'throughput, trivial tasks with { token }', rates.token, rates.raw),
      row('P5-plain', 'throughput, trivial tasks, no token', rates.plain, rates.raw),
      row('P5-c4', 'throughput with { token }, 4 tasks a worker', rates.token4, rates.raw4, 4)];
  } finally {
    await Promise.all(Object.values(pools).map((p) => p.destroy()));
  }
}

export const suite = suiteOf({ P4: stopThenNext, 'P5 P5-plain P5-c4': throughput }, async (_, rows) => {
  const out = await rows();
  assertNothingLive(registry, 'P4–P5');
  return out;
});
