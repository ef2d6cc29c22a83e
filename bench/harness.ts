/**
 * The benchmark contract every suite in bench/ follows. `bench/run.ts` runs the suites, prints
 * the table and writes the JSON (shape below: tools outside the repo read it).
 *
 * A suite measures each fullstop figure against a raw baseline or peer *in the same run*, because
 * this machine is shared and noisy: ratios are what hold.
 */

/** One row of the results JSON. `ratio = fullstop.median / baseline.median`. */
import { FLAG_CELLS, READY } from './workers/handshake.js';

export interface BenchResult {
  /** 'P1'..'P6' as issues #3 and #4 define them; other suites use their own prefixes. */
  id: string;
  /** What is measured, in a few words. */
  metric: string;
  /** 'µs' | 'ms' | 'ns' | 'tasks/s' | ... */
  unit: string;
  fullstop: { median: number; p99: number };
  baseline: { name: string; median: number; p99: number };
  ratio: number;
  better: 'lower' | 'higher';
  /** Extra facts for the row (e.g. survivor counts); printed as a note. */
  extra?: Record<string, unknown>;
}

export interface SuiteContext {
  /** Few samples: the whole run stays under 60 s. */
  quick: boolean;
  /** One progress line. */
  progress(message: string): void;
  /**
   * Whether the run wants the row `id` (`--only`); absent means every row is wanted. A suite may
   * ignore it (the runner filters rows anyway): asking only saves the time of unwanted rows.
   */
  wants?(id: string): boolean;
}

export interface Suite {
  name: string;
  /**
   * The row ids this suite can produce. Optional, but declare it: `--only ID` then skips the
   * suites that cannot produce ID instead of running them to find out.
   */
  ids?: readonly string[];
  run(ctx: SuiteContext): Promise<BenchResult[]>;
}

/** Median and p99 of raw samples (any unit). */
export function summarize(samples: readonly number[]): { median: number; p99: number } {
  if (samples.length === 0) throw new RangeError('samples: expected at least one sample');
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { median: at(0.5), p99: at(0.99) };
}

/** Build a row from raw samples of both sides. */
export function compare(
  head: Pick<BenchResult, 'id' | 'metric' | 'unit' | 'better'> & { extra?: Record<string, unknown> },
  fullstop: readonly number[],
  baselineName: string,
  baseline: readonly number[],
): BenchResult {
  const f = summarize(fullstop);
  const b = summarize(baseline);
  return { ...head, fullstop: f, baseline: { name: baselineName, ...b }, ratio: f.median / b.median };
}

/** One task of `sampleInterleaved`. */
export interface SampledTask {
  name: string;
  /** One call is one sample. Keep its result observable (a sink) so the JIT cannot drop it. */
  fn: () => unknown;
  /**
   * Operations one call performs: samples are divided by it. Nanosecond operations are measured
   * in batches because one timer read (~30–60 ns) would otherwise dwarf them.
   * @default 1
   */
  ops?: number;
}

export interface SampleOptions {
  /** Rounds; each task is sampled once per round, and the order rotates every round. */
  rounds: number;
  /** tinybench time budget per task per round, in ms. */
  timeMs: number;
  /** tinybench minimum iterations per task per round. @default 16 */
  iterations?: number;
  /** Warm-up budget per task, first round only (the JIT keeps what it learnt). @default 50 */
  warmupMs?: number;
}

/**
 * Sample every task with tinybench in interleaved rounds, so each task of a comparison sees the
 * same slice of machine noise: a neighbour's test run that lands in round 3 slows every task of
 * round 3, and the ratio holds. Returns, per task name, every sample in **nanoseconds per
 * operation** (unsorted across rounds).
 */
export async function sampleInterleaved(
  tasks: readonly SampledTask[],
  options: SampleOptions,
): Promise<Map<string, number[]>> {
  const { Bench } = await import('tinybench');
  const samples = new Map<string, number[]>(tasks.map((t) => [t.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    const bench = new Bench({
      time: options.timeMs,
      iterations: options.iterations ?? 16,
      warmup: round === 0,
      warmupTime: options.warmupMs ?? 50,
      warmupIterations: 8,
      retainSamples: true,
      throws: true,
    });
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[(i + round) % tasks.length]!;
      bench.add(task.name, task.fn);
    }
    await bench.run();
    for (const task of tasks) {
      const result = bench.getTask(task.name)!.result;
      if (!('latency' in result) || result.latency.samples === undefined) {
        throw new Error(`${task.name}: tinybench finished in state ${result.state} without samples`);
      }
      const perOp = 1e6 / (task.ops ?? 1);
      const into = samples.get(task.name)!;
      for (const ms of result.latency.samples) into.push(ms * perOp);
    }
  }
  return samples;
}

/** Fresh handshake cells (bench/workers/handshake.ts) over a SharedArrayBuffer, shared with a worker. */
export function flagCells(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(FLAG_CELLS * Int32Array.BYTES_PER_ELEMENT));
}

/**
 * Resolves once the worker set `flags[READY]`; rejects if `settles` settles first (the work died
 * before it was ready). A handshake, never a sleep.
 */
export async function ready(flags: Int32Array, settles: Promise<unknown>, what: string): Promise<void> {
  const wait = Atomics.waitAsync(flags, READY, 0);
  if (!wait.async) return;
  const early = settles.then(
    (v) => { throw new Error(`${what}: settled before it was ready (value ${String(v)})`); },
    (e) => { throw new Error(`${what}: failed before it was ready`, { cause: e }); },
  );
  await Promise.race([wait.value, early]);
}
