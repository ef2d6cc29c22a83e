// P4: cancel → the next turn's task result, vs Piscina's own abort (terminate + respawn). P5*:
// throughput against raw Piscina in rounds, each variant in a process of its own (throughput.ts; docs/benchmarks.md).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { isCancelledError, TurnPool, TurnRegistry, type CancelledError } from '../src/index.js';
import { flagCells, now, settle, started, TASKS, usSince } from './handshake.js';
import { IN_FLIGHT, VARIANTS } from './throughput.js';
import { assertNothingLive, compare, samplePairs, shuffled, suiteOf, type BenchResult, type SuiteContext } from './harness.js';

const registry = new TurnRegistry();

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

/** A variant of P5 in a process of its own (throughput.ts), once it is ready: `round(total)` resolves with its tasks/s. */
async function variantProcess(name: string): Promise<{ round(total: number): Promise<number>; close(): Promise<unknown> }> {
  const child = fork(fileURLToPath(new URL('./throughput.js', import.meta.url)), [name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(child, 'exit');
  const answer = async () => {
    const [m] = await Promise.race([once(child, 'message'), exited.then(([code]) => [{ error: `P5 ${name}: its process exited (${code})` }])]);
    if (m.error !== undefined) throw new Error(m.error);
    return m.rate as number;
  };
  await answer().catch((e: unknown) => (child.kill(), Promise.reject(e)));
  return { round: (total) => (child.send({ total }), answer()), close: () => (child.connected && child.send('exit'), exited) };
}

async function throughput(ctx: SuiteContext): Promise<BenchResult[]> {
  const [generations, rounds, total] = ctx.quick ? [1, 2, 900] : [4, 6, 15_000];
  const names = Object.keys(VARIANTS);
  const samples: Record<'one' | 'four', Record<string, number>[]> = { one: [], four: [] };
  // A process a variant, only one running a round at a time (the others' workers sleep in Atomics.wait). Each generation of
  // processes serves `rounds` rounds after two warm-up rounds, then a fresh one takes over: two processes of one build were
  // measured to read ~5 % apart over a whole row, so a row averages several.
  // A round runs two blocks in a random order, one task a worker (raw, token, plain) and four (raw4, token4), each block's
  // variants in a random order: the variants a ratio compares run next to each other, so a change of the machine's speed
  // between two of them moves both, and no variant always runs first.
  for (let generation = 0; generation < generations; generation++) {
    const children = await Promise.allSettled(names.map(variantProcess));
    try {
      const child = Object.fromEntries(names.map((name, i) => {
        const c = children[i]!;
        if (c.status === 'rejected') throw c.reason;
        return [name, c.value];
      }));
      const block = (variants: string[]) => async (warmup: boolean) => {
        const rates: Record<string, number> = {};
        for (const name of shuffled(variants)) rates[name] = await child[name]!.round(warmup ? Math.ceil(total / 3) : total);
        return rates;
      };
      const taken = await samplePairs(`P5 (processes ${generation + 1} of ${generations})`, { pairs: rounds, warmup: ctx.quick ? 1 : 2, shuffle: true },
        { one: block(['raw', 'token', 'plain']), four: block(['raw4', 'token4']) }, ctx);
      samples.one.push(...taken.samples.one);
      samples.four.push(...taken.samples.four);
    } finally {
      await Promise.all(children.map((c) => (c.status === 'fulfilled' ? c.value.close() : undefined)));
    }
  }
  const series = (block: 'one' | 'four', name: string) => samples[block].map((r) => r[name]!);
  const row = (id: string, metric: string, side: number[], base: number[], perWorker = 1) => compare({ id, metric, unit: 'tasks/s', better: 'higher',
    extra: { goal: '≥ 0.95×', rounds: generations * rounds, processesPerVariant: generations, tasksPerRound: total, inFlight: IN_FLIGHT, threads: 2,
      concurrentTasksPerWorker: perWorker } },
  side, [`raw Piscina${perWorker > 1 ? `, concurrentTasksPerWorker ${perWorker}` : ''}`, base]);
  return [row('P5', 'throughput, trivial tasks with { token }', series('one', 'token'), series('one', 'raw')),
    row('P5-plain', 'throughput, trivial tasks, no token', series('one', 'plain'), series('one', 'raw')),
    row('P5-c4', 'throughput with { token }, 4 tasks a worker', series('four', 'token4'), series('four', 'raw4'), 4)];
}

export const suite = suiteOf({ P4: stopThenNext, 'P5 P5-plain P5-c4': throughput }, async (_, rows) => {
  const out = await rows();
  assertNothingLive(registry, 'P4–P5');
  return out;
});
