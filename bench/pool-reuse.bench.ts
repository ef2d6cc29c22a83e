/**
 * What the pool costs a task, and what a cooperative stop saves. Same-run floors on raw Piscina.
 *
 * P4  1-thread pool: cancel a task in `sleep()`, submit the next turn's trivial task: cancel → its
 *     result, vs raw Piscina aborting through its own `signal` (terminate + respawn); goal ≤ 1/30.
 * P5  Trivial tasks, 100 in flight, 2 threads: TurnPool with `{ token }` (P5), without (P5-plain),
 *     and both pools with `concurrentTasksPerWorker: 4` (P5-c4), vs raw Piscina with the same
 *     options; the ratio is the median of ≥ 12 round ratios (goal ≥ 0.95×).
 */

import { Piscina } from 'piscina';
import { isCancelledError, TurnPool, TurnRegistry, type CancelledError, type CancelToken } from '../src/index.js';
import { assertNothingLive, compare, flagCells, now, ready, samplePairs, settle, usSince, type BenchResult, type Suite, type SuiteContext } from './harness.js';
import { READY } from './workers/protocol.js';

const TASKS = new URL('./workers/tasks.js', import.meta.url).href;
const IN_FLIGHT = 100;

async function stopThenNext(ctx: SuiteContext): Promise<BenchResult> {
  const counts = ctx.quick ? { pairs: 3, warmup: 1 } : { pairs: 30, warmup: 2 };
  ctx.progress(`P4 stop → next task on a 1-thread pool, ${counts.pairs} pairs vs piscina abort (respawn)`);
  const options = { filename: TASKS, minThreads: 1, maxThreads: 1 };
  const registry = new TurnRegistry();
  const pool = new TurnPool(options);
  const raw = new Piscina(options);
  const flags = flagCells();
  /** Start `running`, wait until it is ready, then `stop` and time it to `next`'s result, which must be 7. */
  const stopAndNext = async (running: Promise<unknown>, stop: () => void, next: () => Promise<number>) => {
    const stopped = running.then(() => undefined, (e: unknown) => e as Error);
    await ready(flags, running, 'P4 sleeper');
    await settle();
    const t0 = now();
    stop();
    const value = await next();
    const us = usSince(t0, now());
    if (value !== 7) throw new Error(`P4: the next task returned ${value}`);
    return { us, error: await stopped };
  };
  try {
    const { samples, voided } = await samplePairs('P4', counts, {
      fullstop: async () => {
        let token = registry.beginTurn('p4');
        try {
          Atomics.store(flags, READY, 0);
          const { us, error } = await stopAndNext(
            pool.run({ flags }, { token, name: 'sleepsUntilStopped' }),
            () => { token.cancel(); token = registry.beginTurn('p4'); }, // the next turn retires the stopped one
            () => pool.run<number>(7, { token, name: 'trivial' }),
          );
          if (!isCancelledError(error) || (error as CancelledError).hard) throw new Error(`P4: expected a cooperative stop, got ${String(error)}`);
          return us;
        } finally {
          registry.endTurn('p4', token);
        }
      },
      raw: async () => {
        const controller = new AbortController();
        Atomics.store(flags, READY, 0);
        const { us, error } = await stopAndNext(
          raw.run({ flags }, { name: 'rawSleeper', signal: controller.signal }), () => controller.abort(), () => raw.run(7, { name: 'trivial' }),
        );
        if (error?.name !== 'AbortError') throw new Error(`P4 raw: expected an AbortError, got ${String(error)}`);
        return us;
      },
    });
    const stats = pool.stats();
    if (stats.hardStops !== 0) throw new Error(`P4: ${stats.hardStops} hard stops (every stop should be cooperative)`);
    return compare(
      { id: 'P4', metric: 'stop → next task completes (1 thread)', unit: 'µs', better: 'lower', extra: { goal: '≤ 1/30', voided, cooperativeStops: stats.cooperativeStops } },
      samples.fullstop, 'piscina abort (terminate + respawn)', samples.raw, { paired: true },
    );
  } finally {
    await pool.destroy();
    await raw.destroy();
    assertNothingLive(registry, 'P4');
  }
}

/** Tasks/s for `total` tasks with IN_FLIGHT in flight (a completion submits the next). */
async function drive(submit: (i: number) => Promise<unknown>, total: number): Promise<number> {
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    let [submitted, done] = [0, 0];
    const one = (): void => {
      const i = submitted++;
      submit(i).then((value) => {
        if (value !== i) return reject(new Error(`P5: task ${i} returned ${String(value)}`));
        if (++done === total) resolve();
        else if (submitted < total) one();
      }, reject);
    };
    for (let k = 0; k < Math.min(IN_FLIGHT, total); k++) one();
  });
  return total / ((performance.now() - t0) / 1000);
}

async function throughput(ctx: SuiteContext): Promise<BenchResult[]> {
  const rounds = ctx.quick ? 3 : 12;
  const total = ctx.quick ? 1500 : 15_000;
  const options = { filename: TASKS, name: 'trivial', minThreads: 2, maxThreads: 2 };
  const four = { ...options, concurrentTasksPerWorker: 4 };
  const registry = new TurnRegistry();
  const pools = { raw: new Piscina(options), pool: new TurnPool(options), raw4: new Piscina(four), pool4: new TurnPool(four) };
  /** One round of a variant: `total` tasks (a third of that in a warm-up round) under one turn. */
  const variant = (submit: (i: number, token: CancelToken) => Promise<unknown>) => async (warmup: boolean) => {
    const token = registry.beginTurn('p5');
    try {
      return await drive((i) => submit(i, token), warmup ? Math.ceil(total / 3) : total);
    } finally {
      registry.endTurn('p5', token);
    }
  };
  ctx.progress(`P5 throughput, ${rounds} rounds of ${total} trivial tasks × 5 variants, ${IN_FLIGHT} in flight`);
  try {
    const { samples: rates } = await samplePairs('P5', { pairs: rounds, warmup: ctx.quick ? 1 : 2 }, {
      raw: variant((i) => pools.raw.run(i)),
      token: variant((i, token) => pools.pool.run(i, { token })),
      plain: variant((i) => pools.pool.run(i)),
      raw4: variant((i) => pools.raw4.run(i)),
      token4: variant((i, token) => pools.pool4.run(i, { token })),
    });
    const extra = { goal: '≥ 0.95×', rounds, tasksPerRound: total, inFlight: IN_FLIGHT, threads: 2 };
    const row = (id: string, metric: string, side: number[], base: number[], perWorker = 1) => compare(
      { id, metric, unit: 'tasks/s', better: 'higher', extra: { ...extra, concurrentTasksPerWorker: perWorker } },
      side, `raw Piscina${perWorker > 1 ? `, concurrentTasksPerWorker ${perWorker}` : ''}`, base, { paired: true },
    );
    return [
      row('P5', 'throughput, trivial tasks with { token }', rates.token, rates.raw),
      row('P5-plain', 'throughput, trivial tasks, no token', rates.plain, rates.raw),
      row('P5-c4', 'throughput with { token }, 4 tasks a worker', rates.token4, rates.raw4, 4),
    ];
  } finally {
    await Promise.all(Object.values(pools).map((p) => p.destroy()));
    assertNothingLive(registry, 'P5');
  }
}

export const suite: Suite = {
  name: 'pool-reuse',
  ids: ['P4', 'P5', 'P5-plain', 'P5-c4'],
  async run(ctx) {
    const rows = ctx.wants('P4') ? [await stopThenNext(ctx)] : [];
    if (['P5', 'P5-plain', 'P5-c4'].some(ctx.wants)) rows.push(...(await throughput(ctx)).filter((r) => ctx.wants(r.id)));
    return rows;
  },
};
