/**
 * How fast a TurnPool task stops, and how fast a worker's cancel reaches main. Every row is paired
 * with its floors in the same run (each pair rotates which side goes first).
 *
 * P1  `token.cancel()` → a task blocked in `sleep()` has its CancelledError in hand. Floors: bare
 *     `Atomics.notify` → `wait` (ratio); the same + throwing a pre-built Error (shapeRatio, goal
 *     ≤ 1.25×). Decomposition in extra: `tokenOnlyUs` (a plain worker's `tokenFromHandle().sleep()`
 *     on the turn's root slot: the library's wake path without the pool's child slot),
 *     `slotOnlyUs` (a plain `Atomics.wait` on that slot woken by `cancel()`: main's side alone),
 *     `cancelCallUs` (how long main spends in `cancel()`), and `rawMainBusy50Us` (the raw wake
 *     when main stays busy 50 µs after its notify, as `cancel()` does).
 * P2  `token.cancel()` → a busy task's `checkCancelled()` (every iteration) throws and is caught.
 *     Floors: an `Atomics.load` poll loop; the same + a thrown pre-built Error (shape, ≤ 1.25×).
 * P2-plain  The same loop on `isCancelled()`, nothing thrown, vs the bare poll (goal ≤ 1.25×).
 * P3  `cancelTurn()` in a task → main's `token.signal` listener runs. Floors: `Atomics.waitAsync`
 *     on main resolving after a plain worker's store + notify; the same + aborting an
 *     AbortController with a pre-built reason (shape, goal ≤ 1.1×).
 *
 * Before each cancel, main waits for the task's "ready" handshake and SETTLE_MS more, so the
 * worker really is blocked (P1) or spinning (P2), not on its way there.
 */

import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { TurnPool, TurnRegistry, type CancelToken } from '../src/index.js';
import {
  assertNothingLive, compare, flagCells, pairedRatio, ready, samplePairs, summarize, type BenchResult, type Suite, type SuiteContext,
} from './harness.js';
import { GO, READY, type RawCommand, type RawReport } from './workers/protocol.js';

const TASKS = new URL('./workers/tasks.js', import.meta.url).href;
const SETTLE_MS = 1;
/** P3: the task lingers after its trip; on a loaded host the default grace could hard-stop it first. */
const LINGER_GRACE_MS = 10_000;
/** P1's wake-path probe: how long main stays busy after a raw notify. */
const RAW_BUSY_US = 50;

export const suite: Suite = {
  name: 'pool',
  ids: ['P1', 'P2', 'P2-plain', 'P3'],
  async run(ctx) {
    const wants = ctx.wants ?? (() => true);
    const rows: BenchResult[] = [];
    const lab = new LatencyLab();
    try {
      await lab.online;
      if (wants('P1')) rows.push(await wakeFromSleep(ctx, lab));
      if (wants('P2') || wants('P2-plain')) rows.push(...(await busyCheck(ctx, lab)));
      if (wants('P3')) rows.push(await workerTripsMain(ctx, lab));
    } finally {
      await lab.close();
    }
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
    tokenOnly: () => rawCancelled(lab, 'sleep'),
    slotOnly: () => rawCancelled(lab, 'slot'),
    raw: () => lab.rawFlip({ kind: 'wait' }),
    shape: () => lab.rawFlip({ kind: 'wait', shape: true }),
    rawBusyMain: () => lab.rawFlip({ kind: 'wait' }, RAW_BUSY_US),
  });
  return compare(
    { id: 'P1', metric: 'cancel → task in sleep() wakes', unit: 'µs', better: 'lower',
      extra: {
        goal: 'shape ≤ 1.25×', voided, tokenOnlyUs: medianOf(samples.tokenOnly!), slotOnlyUs: medianOf(samples.slotOnly!),
        tokenOnlyShapeRatio: pairedRatio(samples.tokenOnly!, samples.shape!).ratio, cancelCallUs: medianOf(cancelCall),
        [`rawMainBusy${RAW_BUSY_US}Us`]: medianOf(samples.rawBusyMain!),
      } },
    samples.fullstop!, 'raw Atomics.notify → wait', samples.raw!,
    { paired: true, shape: { name: 'raw + throw a pre-built Error', samples: samples.shape! } },
  );
}

/** The raw worker waits on a turn's own slot (`sleep` through the library, `slot` plain); main calls `token.cancel()`. */
async function rawCancelled(lab: LatencyLab, kind: 'sleep' | 'slot'): Promise<number | undefined> {
  const token = lab.registry.beginTurn('p1-raw');
  try {
    const handle = token.handle;
    const running = Atomics.load(new Int32Array(handle.buffer), handle.index);
    const { report, acted: t0 } = await lab.rawSample({ kind, handle, running }, async () => {
      await delay(SETTLE_MS);
      const t0 = now();
      token.cancel();
      return t0;
    });
    return report.ok ? usSince(t0, report.at) : undefined;
  } finally {
    lab.registry.endTurn('p1-raw', token);
  }
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
  /**
   * Main waits with waitAsync on GO; `prepare` runs before the wait (as fullstop's listener is
   * added before its task runs) and returns what runs on the wake. µs from the worker's store to
   * that callback's stamp.
   */
  const raw = (prepare: () => () => bigint | Promise<bigint>) => async () => {
    const { report, acted: woke } = await lab.rawSample({ kind: 'notify' }, () => {
      const onWake = prepare();
      const wait = Atomics.waitAsync(lab.rawFlags, GO, 0);
      return { at: wait.async ? wait.value.then(onWake) : undefined };
    });
    return woke.at === undefined ? undefined : usSince(report.at, await woke.at);
  };
  const { samples, voided } = await samplePairs('P3', counts, {
    fullstop: async () => {
      const session = 'p3';
      const token = lab.registry.beginTurn(session);
      try {
        const fired = new Promise<bigint>((r) => token.signal.addEventListener('abort', () => r(now()), { once: true }));
        const [at, firedAt] = await Promise.all([lab.pool.run<bigint>({ flags: lab.flags }, { token, name: 'trips', graceMs: LINGER_GRACE_MS }), fired]);
        return usSince(at, firedAt);
      } finally {
        lab.registry.endTurn(session, token);
      }
    },
    raw: raw(() => now),
    shape: raw(() => {
      const controller = new AbortController();
      const fired = new Promise<bigint>((r) => controller.signal.addEventListener('abort', () => r(now()), { once: true }));
      return () => {
        controller.abort(reason);
        return fired;
      };
    }),
  });
  return compare(
    { id: 'P3', metric: 'cancelTurn() in worker → main signal aborts', unit: 'µs', better: 'lower', extra: { goal: 'shape ≤ 1.1×', voided } },
    samples.fullstop!, 'raw store+notify → waitAsync', samples.raw!,
    { paired: true, shape: { name: 'raw waitAsync + AbortController.abort', samples: samples.shape! } },
  );
}
