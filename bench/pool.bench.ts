/**
 * The worker engine: how fast a TurnPool task stops, and what the pool costs a task. Every row is
 * paired with its floors in the same run (pairs rotate which side goes first; P5 goes by rounds).
 *
 * P1  `token.cancel()` → a task blocked in `sleep()` has its CancelledError in hand. Floors: bare
 *     `Atomics.notify` → `wait` (ratio); the same + throwing a pre-built Error (shapeRatio, goal
 *     ≤ 1.25×). Decomposition in extra: `tokenOnlyUs` (a plain worker's `tokenFromHandle().sleep()`
 *     on the turn's root slot: the library's wake path without the pool's child slot),
 *     `cancelCallUs` (how long main spends in `cancel()`), and `rawMainBusy50Us` (the raw wake
 *     when main stays busy 50 µs after its notify, as `cancel()` does).
 * P2  `token.cancel()` → a busy task's `checkCancelled()` (every iteration) throws and is caught.
 *     Floors: an `Atomics.load` poll loop; the same + a thrown pre-built Error (shape, ≤ 1.25×).
 * P2-plain  The same loop on `isCancelled()`, nothing thrown, vs the bare poll (goal ≤ 1.25×).
 * P3  `cancelTurn()` in a task → main's `token.signal` listener runs. Floors: `Atomics.waitAsync`
 *     on main resolving after a plain worker's store + notify; the same + aborting an
 *     AbortController with a pre-built reason (shape, goal ≤ 1.1×).
 * P4  1-thread pool: cancel a task in `sleep()`, submit the next turn's trivial task: cancel → its
 *     result, vs raw Piscina aborting through its own `signal` (terminate + respawn); goal ≤ 1/30.
 * P5  Trivial tasks, 100 in flight, 2 threads: TurnPool with `{ token }` (P5), without (P5-plain),
 *     and both pools with `concurrentTasksPerWorker: 4` (P5-c4), vs raw Piscina with the same
 *     options; the ratio is the median of ≥ 12 round ratios (goal ≥ 0.95×).
 *
 * Before each cancel, main waits for the task's "ready" handshake and SETTLE_MS more, so the
 * worker really is blocked (P1) or spinning (P2), not on its way there.
 */

import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { isCancelledError, TurnPool, TurnRegistry, type CancelledError, type CancelToken } from '../src/index.js';
import {
  assertNothingLive, compare, flagCells, pairedRatio, ready, samplePairs, summarize, type BenchResult, type Suite, type SuiteContext,
} from './harness.js';
import { GO, READY, type RawCommand, type RawReport } from './workers/protocol.js';

const TASKS = new URL('./workers/tasks.js', import.meta.url).href;
const SETTLE_MS = 1;
const IN_FLIGHT = 100;
/** P1's wake-path probe: how long main stays busy after a raw notify. */
const RAW_BUSY_US = 50;

export const suite: Suite = {
  name: 'pool',
  ids: ['P1', 'P2', 'P2-plain', 'P3', 'P4', 'P5', 'P5-plain', 'P5-c4'],
  async run(ctx) {
    const wants = ctx.wants ?? (() => true);
    const rows: BenchResult[] = [];
    if (['P1', 'P2', 'P2-plain', 'P3'].some(wants)) {
      const lab = new LatencyLab();
      try {
        await lab.online;
        if (wants('P1')) rows.push(await wakeFromSleep(ctx, lab));
        if (wants('P2') || wants('P2-plain')) rows.push(...(await busyCheck(ctx, lab)));
        if (wants('P3')) rows.push(await workerTripsMain(ctx, lab));
      } finally {
        await lab.close();
      }
    }
    if (wants('P4')) rows.push(await stopThenNext(ctx));
    if (['P5', 'P5-plain', 'P5-c4'].some(wants)) rows.push(...(await throughput(ctx)));
    return rows;
  },
};

const now = () => process.hrtime.bigint();
const usSince = (t0: bigint, t1: bigint) => Number(t1 - t0) / 1000;
const pairCounts = (ctx: SuiteContext, full = 300) => (ctx.quick ? { pairs: 12, warmup: 3 } : { pairs: full, warmup: 20 });
const medianOf = (xs: readonly number[]) => Math.round(summarize(xs).median * 100) / 100;

/** P1–P3: a 1-thread TurnPool and a plain worker (bench/workers/raw.ts). */
class LatencyLab {
  readonly registry = new TurnRegistry();
  readonly pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  readonly flags = flagCells();
  readonly rawFlags = flagCells();
  readonly raw = new Worker(new URL('./workers/raw.js', import.meta.url), { workerData: { flags: this.rawFlags } });
  readonly online: Promise<unknown> = once(this.raw, 'online');
  #turns = 0;

  /** One pool task under a fresh turn; `act(token)` once the task is ready; resolves with [act's value, the task's]. */
  async task<T, A>(name: string, act: (token: CancelToken) => A): Promise<[A, T]> {
    const session = `lab-${++this.#turns}`;
    const token = this.registry.beginTurn(session);
    try {
      Atomics.store(this.flags, READY, 0);
      const result = this.pool.run<T>({ flags: this.flags }, { token, name });
      await ready(this.flags, result, name);
      await delay(SETTLE_MS);
      const acted = act(token);
      return [acted, await result];
    } finally {
      this.registry.endTurn(session, token);
    }
  }

  /** One raw command; `act` runs once the worker is ready; resolves with its report and act's value. */
  async rawSample<A>(command: RawCommand, act: () => A | Promise<A>): Promise<{ report: RawReport; acted: A }> {
    Atomics.store(this.rawFlags, READY, 0);
    Atomics.store(this.rawFlags, GO, 0);
    const report = once(this.raw, 'message') as Promise<[RawReport]>;
    this.raw.postMessage(command);
    await ready(this.rawFlags, report, `raw ${command.kind}`);
    const acted = await act();
    return { report: (await report)[0], acted };
  }

  /**
   * Main flips GO (and notifies, for a waiter) SETTLE_MS after the raw worker is ready; µs to its
   * stamp. `busyUs`: main then stays busy that long before it yields, as a `cancel()` that goes
   * on to abort signals and call owners does.
   */
  async rawFlip(command: RawCommand, busyUs = 0): Promise<number | undefined> {
    const { report, acted: t0 } = await this.rawSample(command, async () => {
      await delay(SETTLE_MS);
      const t0 = now();
      Atomics.store(this.rawFlags, GO, 1);
      Atomics.notify(this.rawFlags, GO);
      while (usSince(t0, now()) < busyUs);
      return t0;
    });
    return report.ok ? usSince(t0, report.at) : undefined;
  }

  async close(): Promise<void> {
    await this.pool.destroy();
    await this.raw.terminate();
    assertNothingLive(this.registry, 'P1–P3');
  }
}

async function wakeFromSleep(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult> {
  const counts = pairCounts(ctx);
  ctx.progress(`P1 cancel → sleep() wakes, ${counts.pairs} pairs`);
  const cancelCall: number[] = [];
  const { samples, voided } = await samplePairs('P1', counts, {
    fullstop: async () => {
      const [t0, at] = await lab.task<bigint, bigint>('sleeper', (token) => {
        const t0 = now();
        token.cancel();
        cancelCall.push(usSince(t0, now()));
        return t0;
      });
      return usSince(t0, at);
    },
    tokenOnly: async () => {
      const token = lab.registry.beginTurn('p1-token-only');
      try {
        const { report, acted: t0 } = await lab.rawSample({ kind: 'sleep', handle: token.handle }, async () => {
          await delay(SETTLE_MS);
          const t0 = now();
          token.cancel();
          return t0;
        });
        return report.ok ? usSince(t0, report.at) : undefined;
      } finally {
        lab.registry.endTurn('p1-token-only', token);
      }
    },
    raw: () => lab.rawFlip({ kind: 'wait' }),
    shape: () => lab.rawFlip({ kind: 'wait', shape: true }),
    rawBusyMain: () => lab.rawFlip({ kind: 'wait' }, RAW_BUSY_US),
  });
  return compare(
    { id: 'P1', metric: 'cancel → task in sleep() wakes', unit: 'µs', better: 'lower',
      extra: {
        goal: 'shape ≤ 1.25×', voided, tokenOnlyUs: medianOf(samples.tokenOnly!),
        tokenOnlyShapeRatio: pairedRatio(samples.tokenOnly!, samples.shape!).ratio, cancelCallUs: medianOf(cancelCall),
        [`rawMainBusy${RAW_BUSY_US}Us`]: medianOf(samples.rawBusyMain!),
      } },
    samples.fullstop!, 'raw Atomics.notify → wait', samples.raw!,
    { paired: true, shape: { name: 'raw + throw a pre-built Error', samples: samples.shape! } },
  );
}

async function busyCheck(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult[]> {
  const counts = pairCounts(ctx);
  ctx.progress(`P2 cancel → busy checkCancelled() throws, ${counts.pairs} pairs`);
  let sink = 0;
  const side = (name: string) => async () => {
    const [t0, [at, x]] = await lab.task<[bigint, number], bigint>(name, (token) => {
      const t0 = now();
      token.cancel();
      return t0;
    });
    sink ^= x;
    return usSince(t0, at);
  };
  const { samples, voided } = await samplePairs('P2', counts, {
    fullstop: side('pollsEveryIteration'),
    plain: side('pollsIsCancelled'),
    raw: () => lab.rawFlip({ kind: 'poll' }),
    shape: () => lab.rawFlip({ kind: 'poll', shape: true }),
  });
  const extra = { voided, sink: sink & 1 };
  return [
    compare({ id: 'P2', metric: 'cancel → busy checkCancelled() throws', unit: 'µs', better: 'lower', extra: { goal: 'shape ≤ 1.25×', ...extra } },
      samples.fullstop!, 'raw Atomics.load poll', samples.raw!,
      { paired: true, shape: { name: 'raw poll + throw a pre-built Error', samples: samples.shape! } }),
    compare({ id: 'P2-plain', metric: 'cancel → busy isCancelled() loop ends', unit: 'µs', better: 'lower', extra: { goal: '≤ 1.25×', ...extra } },
      samples.plain!, 'raw Atomics.load poll', samples.raw!, { paired: true }),
  ];
}

async function workerTripsMain(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult> {
  const counts = pairCounts(ctx, 200);
  ctx.progress(`P3 cancelTurn() in a worker → main signal fires, ${counts.pairs} pairs`);
  const reason = new Error('cancelled');
  /** Main waits with waitAsync on GO; `then` runs on the wake. µs from the worker's store to then's stamp. */
  const raw = (then: () => bigint | Promise<bigint>) => async () => {
    const { report, acted: woke } = await lab.rawSample({ kind: 'notify' }, () => {
      const wait = Atomics.waitAsync(lab.rawFlags, GO, 0);
      return { at: wait.async ? wait.value.then(then) : undefined };
    });
    return woke.at === undefined ? undefined : usSince(report.at, await woke.at);
  };
  const { samples, voided } = await samplePairs('P3', counts, {
    fullstop: async () => {
      const session = 'p3';
      const token = lab.registry.beginTurn(session);
      try {
        const fired = new Promise<bigint>((r) => token.signal.addEventListener('abort', () => r(now()), { once: true }));
        const [at, firedAt] = await Promise.all([lab.pool.run<bigint>({ flags: lab.flags }, { token, name: 'trips' }), fired]);
        return usSince(at, firedAt);
      } finally {
        lab.registry.endTurn(session, token);
      }
    },
    raw: raw(() => now()),
    shape: raw(() => {
      const controller = new AbortController();
      const fired = new Promise<bigint>((r) => controller.signal.addEventListener('abort', () => r(now()), { once: true }));
      controller.abort(reason);
      return fired;
    }),
  });
  return compare(
    { id: 'P3', metric: 'cancelTurn() in worker → main signal aborts', unit: 'µs', better: 'lower', extra: { goal: 'shape ≤ 1.1×', voided } },
    samples.fullstop!, 'raw store+notify → waitAsync', samples.raw!,
    { paired: true, shape: { name: 'raw waitAsync + AbortController.abort', samples: samples.shape! } },
  );
}

async function stopThenNext(ctx: SuiteContext): Promise<BenchResult> {
  const counts = ctx.quick ? { pairs: 3, warmup: 1 } : { pairs: 30, warmup: 2 };
  ctx.progress(`P4 stop → next task on a 1-thread pool, ${counts.pairs} pairs vs piscina abort (respawn)`);
  const options = { filename: TASKS, minThreads: 1, maxThreads: 1 };
  const registry = new TurnRegistry();
  const pool = new TurnPool(options);
  const raw = new Piscina(options);
  const flags = flagCells();
  /** Start `running`, wait until it is ready, then `stop` and time it to `next`'s result. */
  const stopAndNext = async (running: Promise<unknown>, stop: () => void, next: () => Promise<number>) => {
    const stopped = running.then(() => undefined, (e: unknown) => e);
    await ready(flags, running, 'P4 sleeper');
    await delay(SETTLE_MS);
    const t0 = now();
    stop();
    const value = await next();
    const us = usSince(t0, now());
    return { us, value, error: (await stopped) as Error | undefined };
  };
  try {
    const { samples, voided } = await samplePairs('P4', counts, {
      fullstop: async () => {
        let token = registry.beginTurn('p4');
        try {
          Atomics.store(flags, READY, 0);
          const { us, value, error } = await stopAndNext(
            pool.run({ flags }, { token, name: 'sleepsUntilStopped' }),
            () => { token.cancel(); token = registry.beginTurn('p4'); }, // the next turn retires the stopped one
            () => pool.run<number>(7, { token, name: 'trivial' }),
          );
          if (value !== 7 || !isCancelledError(error) || (error as CancelledError).hard) throw new Error(`P4: expected a cooperative stop, got ${String(error)}`);
          return us;
        } finally {
          registry.endTurn('p4', token);
        }
      },
      raw: async () => {
        const controller = new AbortController();
        Atomics.store(flags, READY, 0);
        const { us, value, error } = await stopAndNext(
          raw.run({ flags }, { name: 'rawSleeper', signal: controller.signal }), () => controller.abort(), () => raw.run(7, { name: 'trivial' }),
        );
        if (value !== 7 || error?.name !== 'AbortError') throw new Error(`P4 raw: expected an AbortError, got ${String(error)}`);
        return us;
      },
    });
    const stats = pool.stats();
    if (stats.hardStops !== 0) throw new Error(`P4: ${stats.hardStops} hard stops (every stop should be cooperative)`);
    return compare(
      { id: 'P4', metric: 'stop → next task completes (1 thread)', unit: 'µs', better: 'lower',
        extra: { goal: '≤ 1/30', voided, cooperativeStops: stats.cooperativeStops } },
      samples.fullstop!, 'piscina abort (terminate + respawn)', samples.raw!, { paired: true },
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
    let submitted = 0;
    let done = 0;
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
  const variants: Record<string, (i: number, token: CancelToken) => Promise<unknown>> = {
    raw: (i) => pools.raw.run(i),
    token: (i, token) => pools.pool.run(i, { token }),
    plain: (i) => pools.pool.run(i),
    raw4: (i) => pools.raw4.run(i),
    token4: (i, token) => pools.pool4.run(i, { token }),
  };
  const names = Object.keys(variants);
  ctx.progress(`P5 throughput, ${rounds} rounds of ${total} trivial tasks × ${names.length} variants, ${IN_FLIGHT} in flight`);
  const rates = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  try {
    for (let round = ctx.quick ? -1 : -2; round < rounds; round++) { // warm-up rounds first
      for (let k = 0; k < names.length; k++) {
        const name = names[(k + round + 2) % names.length]!;
        const token = registry.beginTurn('p5');
        try {
          const rate = await drive((i) => variants[name]!(i, token), round < 0 ? Math.ceil(total / 3) : total);
          if (round >= 0) rates[name]!.push(rate);
        } finally {
          registry.endTurn('p5', token);
        }
      }
    }
  } finally {
    await Promise.all(Object.values(pools).map((p) => p.destroy()));
    assertNothingLive(registry, 'P5');
  }
  const extra = { goal: '≥ 0.95×', rounds, tasksPerRound: total, inFlight: IN_FLIGHT, threads: 2 };
  const row = (id: string, metric: string, side: string, base: string, perWorker = 1) => compare(
    { id, metric, unit: 'tasks/s', better: 'higher', extra: { ...extra, concurrentTasksPerWorker: perWorker } },
    rates[side]!, `raw Piscina${perWorker > 1 ? `, concurrentTasksPerWorker ${perWorker}` : ''}`, rates[base]!, { paired: true },
  );
  return [
    row('P5', 'throughput, trivial tasks with { token }', 'token', 'raw'),
    row('P5-plain', 'throughput, trivial tasks, no token', 'plain', 'raw'),
    row('P5-c4', 'throughput with { token }, 4 tasks a worker', 'token4', 'raw4', 4),
  ];
}
