/**
 * The worker engine (issue #3): how fast a TurnPool task stops, and what the pool costs per task.
 * Every row is measured against a raw baseline in the same run, pair by pair (the side that goes
 * first alternates), or round by round for throughput.
 *
 * P1  `token.cancel()` on main → a task blocked in `sleep()` has its `CancelledError` in hand, vs
 *     a plain worker blocked in `Atomics.wait` woken by main's `Atomics.store` + `notify`
 *     (goal ≤ 1.25×).
 * P2  `token.cancel()` on main → a busy task's `checkCancelled()` (called on every iteration)
 *     throws and the task has caught it, vs a plain worker spinning on `Atomics.load` of a cell
 *     main flips (goal ≤ 1.5×). Extra: the same loop on `isCancelled()` (no error to build).
 * P3  `cancelTurn()` in a task → main's `token.signal` 'abort' listener runs, vs main's
 *     `Atomics.waitAsync` resolving after a plain worker's `Atomics.store` + `notify` (goal ≤ 1.25×).
 * P4  On a 1-thread pool, a task in `sleep()` is cancelled and the next turn's trivial task is
 *     submitted right after: cancel → the next task's result. Baseline: raw Piscina, same options,
 *     the running task aborted through piscina's own `signal` (terminate + respawn), the next task
 *     submitted right after (goal: fullstop ≥ 30× faster, ratio ≤ 1/30).
 * P5  Throughput of trivial tasks, 100 in flight, `minThreads = maxThreads = 2`: TurnPool with the
 *     turn's `{ token }` (P5) and without (P5-plain) vs raw Piscina with the same options, in
 *     rounds that rotate the order; medians over rounds (goal ≥ 0.95×).
 *
 * Extras (in each row's note, not baselines): what part of a gap is the price of the API shape
 * rather than of fullstop — P1/P2 `rawPlusNewError*` (the raw side building one plain `Error`
 * before its stamp: a cancelled check must throw one), P2 `isCancelledLoop*` (the same busy task
 * on `isCancelled()`, nothing thrown), P3 `rawPlusAbortSignal*` (the raw wake-up then aborting an
 * AbortController with an Error: the floor of any signal-based API), P5 `rawAbortable` (raw
 * piscina given a no-op signal object, as TurnPool gives it for every task with a token) and
 * `rawFreshAbortController`, and `mainUs_*` (main-thread event-loop active µs per task, from
 * `performance.eventLoopUtilization()`, steadier than the rates on a shared machine).
 *
 * Clock (P1–P3): `process.hrtime.bigint()` on both threads — one monotonic clock per process, so
 * cross-thread differences are exact to the ns (bench/workers/pool-protocol.ts). Before every
 * cancel, main waits for the task's "ready" handshake and then SETTLE_MS more, so the worker is
 * really blocked (P1) or spinning (P2) and not still on its way there.
 */

import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { isCancelledError, TurnPool, TurnRegistry, type CancelledError, type CancelToken } from '../src/index.js';
import { compare, flagCells, ready, summarize, type BenchResult, type Suite, type SuiteContext } from './harness.js';
import { GO, READY, type RawCommand, type RawReport } from './workers/pool-protocol.js';

const TASKS = new URL('./workers/pool-tasks.js', import.meta.url).href;
const RAW_WORKER = new URL('./workers/pool-raw.js', import.meta.url);
/** Main's pause between the worker's "ready" and the cancel. */
const SETTLE_MS = 1;
const IN_FLIGHT = 100;

export const suite: Suite = {
  name: 'pool',
  ids: ['P1', 'P2', 'P3', 'P4', 'P5', 'P5-plain'],
  async run(ctx) {
    const wants = ctx.wants ?? (() => true);
    const rows: BenchResult[] = [];
    if (wants('P1') || wants('P2') || wants('P3')) {
      const lab = new LatencyLab();
      try {
        await lab.online;
        if (wants('P1')) rows.push(await wakeFromSleep(ctx, lab));
        if (wants('P2')) rows.push(await busyCheckThrows(ctx, lab));
        if (wants('P3')) rows.push(await workerTripsMain(ctx, lab));
      } finally {
        await lab.close();
      }
    }
    if (wants('P4')) rows.push(await stopThenNext(ctx));
    if (wants('P5') || wants('P5-plain')) rows.push(...(await throughput(ctx)).filter((r) => wants(r.id)));
    return rows;
  },
};

const now = () => process.hrtime.bigint();
const usSince = (t0: bigint, t1: bigint) => Number(t1 - t0) / 1000;


// ---------------------------------------------------------------------------------------------
// P1–P3: one 1-thread TurnPool and one plain worker, sampled in alternating pairs.

class LatencyLab {
  readonly registry = new TurnRegistry();
  readonly pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  /** The task's cells (fullstop side); a new copy of the view travels with each task. */
  readonly flags = flagCells();
  /** The plain worker's cells, sent once. */
  readonly rawFlags = flagCells();
  readonly raw = new Worker(RAW_WORKER, { workerData: { flags: this.rawFlags } });
  readonly online: Promise<unknown> = once(this.raw, 'online');
  #sessions = 0;

  beginTurn(): { token: CancelToken; end(): void } {
    const session = `lab-${++this.#sessions}`;
    const token = this.registry.beginTurn(session);
    return { token, end: () => this.registry.endTurn(session, token) };
  }

  /** One raw command; resolves with the worker's report once it is ready and `act` ran. */
  async rawSample(command: RawCommand, act: () => bigint | Promise<bigint>): Promise<{ report: RawReport; t0: bigint }> {
    Atomics.store(this.rawFlags, READY, 0);
    Atomics.store(this.rawFlags, GO, 0);
    const report = once(this.raw, 'message') as Promise<[RawReport]>;
    this.raw.postMessage(command);
    await ready(this.rawFlags, report, `raw ${command.kind}`);
    const t0 = await act();
    return { report: (await report)[0], t0 };
  }

  async close(): Promise<void> {
    await this.pool.destroy();
    await this.raw.terminate();
    assertNothingLive(this.registry, 'P1–P3');
  }
}

interface PairPlan {
  id: string;
  pairs: number;
  /** Unrecorded pairs first: JIT, and the pool's first load of each task name. */
  warmup: number;
  sides: Record<string, () => Promise<number | undefined>>;
}

/** Sample every side `pairs` times, rotating which side goes first; undefined samples are voided. */
async function samplePairs(plan: PairPlan): Promise<{ samples: Map<string, number[]>; voided: number }> {
  const names = Object.keys(plan.sides);
  const samples = new Map(names.map((n) => [n, [] as number[]]));
  let voided = 0;
  for (let pair = 0; pair < plan.warmup + plan.pairs; pair++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + pair) % names.length]!;
      const sample = await plan.sides[name]!();
      if (pair < plan.warmup) continue;
      if (sample === undefined) voided++;
      else samples.get(name)!.push(sample);
    }
  }
  if (voided > plan.pairs / 10) throw new Error(`${plan.id}: ${voided} void samples out of ${plan.pairs * names.length}`);
  return { samples, voided };
}

function pairCounts(ctx: SuiteContext, full = 300): { pairs: number; warmup: number } {
  return ctx.quick ? { pairs: 25, warmup: 5 } : { pairs: full, warmup: 20 };
}

async function wakeFromSleep(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult> {
  const { pairs, warmup } = pairCounts(ctx);
  ctx.progress(`P1 cancel → sleep() wakes, ${pairs} pairs vs Atomics.notify → wait`);
  const { samples, voided } = await samplePairs({
    id: 'P1', pairs, warmup,
    sides: {
      fullstop: async () => {
        const turn = lab.beginTurn();
        try {
          Atomics.store(lab.flags, READY, 0);
          const result = lab.pool.run<bigint>({ flags: lab.flags }, { token: turn.token, name: 'sleeper' });
          await ready(lab.flags, result, 'P1 sleeper');
          await delay(SETTLE_MS);
          const t0 = now();
          turn.token.cancel();
          return usSince(t0, await result);
        } finally {
          turn.end();
        }
      },
      raw: () => rawWake(lab, false),
      rawWithError: () => rawWake(lab, true),
    },
  });
  const withError = summarize(samples.get('rawWithError')!);
  return compare(
    {
      id: 'P1', metric: 'cancel → task in sleep() wakes', unit: 'µs', better: 'lower',
      extra: {
        goal: '≤ 1.25×', pairs, voided, measuredTo: 'the CancelledError caught in the task',
        rawPlusNewErrorMedianUs: withError.median, rawPlusNewErrorP99Us: withError.p99,
      },
    },
    samples.get('fullstop')!, 'raw Atomics.notify → Atomics.wait', samples.get('raw')!,
  );
}

/** P1 baseline: notify → wait; with `withError` the worker builds an Error before its stamp. */
async function rawWake(lab: LatencyLab, withError: boolean): Promise<number | undefined> {
  const { report, t0 } = await lab.rawSample({ kind: 'wait', withError }, async () => {
    await delay(SETTLE_MS);
    const t0 = now();
    Atomics.store(lab.rawFlags, GO, 1);
    Atomics.notify(lab.rawFlags, GO);
    return t0;
  });
  return report.ok ? usSince(t0, report.at) : undefined;
}

async function busyCheckThrows(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult> {
  const { pairs, warmup } = pairCounts(ctx);
  ctx.progress(`P2 cancel → busy checkCancelled() throws, ${pairs} pairs vs an Atomics.load poll`);
  let sink = 0;
  const rawPoll = async (withError: boolean) => {
    const { report, t0 } = await lab.rawSample({ kind: 'poll', withError }, async () => {
      await delay(SETTLE_MS);
      const t0 = now();
      Atomics.store(lab.rawFlags, GO, 1);
      return t0;
    });
    sink ^= report.sink;
    return usSince(t0, report.at);
  };
  const fullstopSide = (name: string) => async () => {
    const turn = lab.beginTurn();
    try {
      Atomics.store(lab.flags, READY, 0);
      const result = lab.pool.run<[bigint, number]>({ flags: lab.flags }, { token: turn.token, name });
      await ready(lab.flags, result, `P2 ${name}`);
      await delay(SETTLE_MS);
      const t0 = now();
      turn.token.cancel();
      const [at, x] = await result;
      sink ^= x;
      return usSince(t0, at);
    } finally {
      turn.end();
    }
  };
  const { samples, voided } = await samplePairs({
    id: 'P2', pairs, warmup,
    sides: {
      fullstop: fullstopSide('pollsEveryIteration'),
      isCancelled: fullstopSide('pollsIsCancelled'),
      raw: () => rawPoll(false),
      rawWithError: () => rawPoll(true),
    },
  });
  const plain = summarize(samples.get('isCancelled')!);
  const withError = summarize(samples.get('rawWithError')!);
  return compare(
    {
      id: 'P2', metric: 'cancel → busy checkCancelled() throws', unit: 'µs', better: 'lower',
      extra: {
        goal: '≤ 1.5×', pairs, voided, pollEvery: 1, measuredTo: 'the CancelledError caught in the task',
        isCancelledLoopMedianUs: plain.median, isCancelledLoopP99Us: plain.p99,
        rawPlusNewErrorMedianUs: withError.median, rawPlusNewErrorP99Us: withError.p99, sink: sink & 1,
      },
    },
    samples.get('fullstop')!, 'raw Atomics.load poll loop', samples.get('raw')!,
  );
}

async function workerTripsMain(ctx: SuiteContext, lab: LatencyLab): Promise<BenchResult> {
  const { pairs, warmup } = pairCounts(ctx, 200);
  ctx.progress(`P3 cancelTurn() in a worker → main signal fires, ${pairs} pairs vs Atomics.waitAsync`);
  const { samples, voided } = await samplePairs({
    id: 'P3', pairs, warmup,
    sides: {
      fullstop: async () => {
        const turn = lab.beginTurn();
        try {
          const fired = new Promise<bigint>((resolve) => turn.token.signal.addEventListener('abort', () => resolve(now()), { once: true }));
          const [at, firedAt] = await Promise.all([lab.pool.run<bigint>({ flags: lab.flags }, { token: turn.token, name: 'trips' }), fired]);
          return usSince(at, firedAt);
        } finally {
          turn.end();
        }
      },
      raw: async () => {
        let woke: Promise<bigint> | undefined;
        const { report } = await lab.rawSample({ kind: 'notify' }, () => {
          const wait = Atomics.waitAsync(lab.rawFlags, GO, 0);
          woke = wait.async ? wait.value.then(() => now()) : Promise.resolve(0n);
          return 0n;
        });
        const wokeAt = await woke!;
        return wokeAt === 0n ? undefined : usSince(report.at, wokeAt);
      },
      // Not the baseline: the raw wake-up plus what any AbortSignal costs (a fresh controller,
      // abort(new Error()), the listener) — the floor for a signal-based API.
      rawThenAbort: async () => {
        let woke: Promise<bigint> | undefined;
        const { report } = await lab.rawSample({ kind: 'notify' }, () => {
          const controller = new AbortController();
          const fired = new Promise<bigint>((resolve) => controller.signal.addEventListener('abort', () => resolve(now()), { once: true }));
          const wait = Atomics.waitAsync(lab.rawFlags, GO, 0);
          woke = wait.async ? wait.value.then(() => { controller.abort(new Error('cancelled')); return fired; }) : Promise.resolve(0n);
          return 0n;
        });
        const wokeAt = await woke!;
        return wokeAt === 0n ? undefined : usSince(report.at, wokeAt);
      },
    },
  });
  const withAbort = summarize(samples.get('rawThenAbort')!);
  return compare(
    {
      id: 'P3', metric: 'cancelTurn() in worker → main signal aborts', unit: 'µs', better: 'lower',
      extra: { goal: '≤ 1.25×', pairs, voided, rawPlusAbortSignalMedianUs: withAbort.median, rawPlusAbortSignalP99Us: withAbort.p99 },
    },
    samples.get('fullstop')!, 'raw Atomics.store+notify → waitAsync', samples.get('raw')!,
  );
}

// ---------------------------------------------------------------------------------------------
// P4: stop → next task on a 1-thread pool.

async function stopThenNext(ctx: SuiteContext): Promise<BenchResult> {
  const pairs = ctx.quick ? 4 : 30;
  ctx.progress(`P4 stop → next task on a 1-thread pool, ${pairs} pairs vs piscina abort (respawn)`);
  const options = { filename: TASKS, minThreads: 1, maxThreads: 1 };
  const registry = new TurnRegistry();
  const pool = new TurnPool(options);
  const raw = new Piscina(options);
  const flags = flagCells();
  let rawThreads = new Set<number>();
  try {
    const { samples, voided } = await samplePairs({
      id: 'P4', pairs, warmup: 2,
      sides: {
        fullstop: async () => {
          let token = registry.beginTurn('p4');
          try {
            Atomics.store(flags, READY, 0);
            const running = pool.run({ flags }, { token, name: 'sleepsUntilStopped' });
            const stopped = running.then(() => undefined, (e: unknown) => e);
            await ready(flags, running, 'P4 sleepsUntilStopped');
            await delay(SETTLE_MS);
            const t0 = now();
            token.cancel();
            token = registry.beginTurn('p4'); // the next turn (retires the stopped one)
            const value = await pool.run<number>(7, { token, name: 'trivial' });
            const t1 = now();
            const error = await stopped;
            if (value !== 7 || !isCancelledError(error) || (error as CancelledError).hard) {
              throw new Error(`P4: expected a cooperative stop and 7, got ${String(error)} and ${value}`);
            }
            return usSince(t0, t1);
          } finally {
            registry.endTurn('p4', token);
          }
        },
        raw: async () => {
          const controller = new AbortController();
          Atomics.store(flags, READY, 0);
          const running = raw.run({ flags }, { name: 'rawSleeper', signal: controller.signal });
          const stopped = running.then(() => undefined, (e: unknown) => e);
          await ready(flags, running, 'P4 rawSleeper');
          await delay(SETTLE_MS);
          const t0 = now();
          controller.abort();
          const value = await raw.run(7, { name: 'trivial' });
          const t1 = now();
          const error = await stopped;
          if (value !== 7 || (error as Error | undefined)?.name !== 'AbortError') {
            throw new Error(`P4 raw: expected an AbortError and 7, got ${String(error)} and ${value}`);
          }
          rawThreads = new Set([...rawThreads, ...raw.threads.map((t) => t.threadId)]);
          return usSince(t0, t1);
        },
      },
    });
    const stats = pool.stats();
    if (stats.hardStops !== 0) throw new Error(`P4: ${stats.hardStops} hard stops (every stop should be cooperative)`);
    return compare(
      {
        id: 'P4', metric: 'stop → next task completes (1 thread)', unit: 'µs', better: 'lower',
        extra: {
          goal: 'ratio ≤ 1/30 (≥ 30× faster)', pairs, voided, cooperativeStops: stats.cooperativeStops,
          fullstopThreads: pool.piscina.threads.length, piscinaThreadsSeen: rawThreads.size,
        },
      },
      samples.get('fullstop')!, 'piscina abort (terminate + respawn)', samples.get('raw')!,
    );
  } finally {
    await pool.destroy();
    await raw.destroy();
    assertNothingLive(registry, 'P4');
  }
}

// ---------------------------------------------------------------------------------------------
// P5: throughput, 100 in flight, 2 threads.

/** Tasks/s for `total` tasks with `IN_FLIGHT` in flight (a completion submits the next). */
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
  const total = ctx.quick ? 3000 : 15_000;
  const options = { filename: TASKS, name: 'trivial', minThreads: 2, maxThreads: 2 };
  const registry = new TurnRegistry();
  const pool = new TurnPool(options);
  const raw = new Piscina(options);
  const variants: Record<string, (i: number, token: CancelToken) => Promise<unknown>> = {
    raw: (i) => raw.run(i),
    token: (i, token) => pool.run(i, { token }),
    plain: (i) => pool.run(i),
    // Not rows. What raw piscina pays for per-task cancellation (a fresh AbortController each)…
    rawSignal: (i) => raw.run(i, { signal: new AbortController().signal }),
    // …and for an abortable task as such: a no-op signal object, which is what TurnPool gives
    // piscina for every task with a token (task-run.ts: the run doubles as the signal).
    rawAbortable: (i) => raw.run(i, { signal: noopSignal() as never }),
  };
  const names = Object.keys(variants);
  ctx.progress(`P5 throughput, ${rounds} rounds of ${total} trivial tasks × ${names.length} variants, ${IN_FLIGHT} in flight`);
  const samples = new Map(names.map((n) => [n, [] as number[]]));
  /** Main-thread event-loop active time per task (µs), per variant: steadier than the rates. */
  const mainUs = new Map(names.map((n) => [n, [] as number[]]));
  try {
    const runRound = async (round: number, count: number, record: boolean) => {
      for (let k = 0; k < names.length; k++) {
        const name = names[(k + round) % names.length]!;
        const token = registry.beginTurn('p5');
        try {
          const elu = performance.eventLoopUtilization();
          const rate = await drive((i) => variants[name]!(i, token), count);
          if (record) {
            samples.get(name)!.push(rate);
            mainUs.get(name)!.push((performance.eventLoopUtilization(elu).active * 1000) / count);
          }
        } finally {
          registry.endTurn('p5', token);
        }
      }
    };
    for (let w = 0; w < 2; w++) await runRound(w, ctx.quick ? 2000 : 5000, false);
    for (let round = 0; round < rounds; round++) await runRound(round, total, true);
  } finally {
    await pool.destroy();
    await raw.destroy();
    assertNothingLive(registry, 'P5');
  }
  const rawRates = samples.get('raw')!;
  const pairedRatio = (name: string) => summarize(samples.get(name)!.map((r, i) => r / rawRates[i]!)).median;
  const median = (name: string, from = samples) => summarize(from.get(name)!).median;
  /** Main-thread µs per task of these variants, as flat `mainUs_<variant>` keys (one note line). */
  const mainUsOf = (...of: string[]) => Object.fromEntries(of.map((n) => [`mainUs_${n}`, Math.round(median(n, mainUs) * 100) / 100]));
  const extra = { goal: '≥ 0.95×', rounds, tasksPerRound: total, inFlight: IN_FLIGHT, threads: 2 };
  return [
    compare(
      {
        id: 'P5', metric: 'throughput, trivial tasks with { token }', unit: 'tasks/s', better: 'higher',
        extra: {
          ...extra, medianOfRoundRatios: pairedRatio('token'), ...mainUsOf('raw', 'rawAbortable', 'rawSignal', 'token'),
          rawAbortableRatio: pairedRatio('rawAbortable'), rawFreshAbortControllerRatio: pairedRatio('rawSignal'),
        },
      },
      samples.get('token')!, 'raw Piscina', rawRates,
    ),
    compare(
      {
        id: 'P5-plain', metric: 'throughput, trivial tasks, no token', unit: 'tasks/s', better: 'higher',
        extra: { ...extra, medianOfRoundRatios: pairedRatio('plain'), ...mainUsOf('raw', 'plain') },
      },
      samples.get('plain')!, 'raw Piscina', rawRates,
    ),
  ];
}

/** The least an AbortSignal-like object can be: piscina only reads `aborted` and adds a listener. */
function noopSignal(): object {
  return { aborted: false, addEventListener() {}, removeEventListener() {} };
}

/** A leaked slot, bridge or owner would make the figures a lie (and is a bug to report). */
function assertNothingLive(registry: TurnRegistry, id: string): void {
  const stats = registry.stats();
  if (Object.values(stats).some((n) => n !== 0)) throw new Error(`${id}: left live: ${JSON.stringify(stats)}`);
}
