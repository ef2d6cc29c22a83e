/**
 * The contract every suite in bench/ follows, and the sampling they share. `bench/run.ts` runs the
 * suites, prints the table and writes the JSON (tools outside the repo read its shape).
 *
 * A suite measures each fullstop figure against a floor *in the same run*, pair by pair (or round
 * by round), because this machine is shared and noisy: a neighbour that slows round 3 slows both
 * sides of round 3, so the per-pair ratio holds where absolute figures move by 2×.
 */

import { READY } from './workers/protocol.js';

/** Spread of the per-pair ratios behind `ratio`: quartiles and extremes, and how many pairs. */
export type Spread = Record<'min' | 'q1' | 'q3' | 'max' | 'pairs', number>;

/** One row of the results JSON. */
export interface BenchResult {
  /** 'T1', 'P1', 'R1', 'S1-0', …: docs/benchmarks.md lists them. */
  id: string;
  /** What is measured, in a few words; `unit`: 'µs' | 'ms' | 'ns' | 'tasks/s' | ... */
  metric: string;
  unit: string;
  fullstop: { median: number; p99: number };
  baseline: { name: string; median: number; p99: number };
  /** Median of the per-pair ratios fullstop/baseline when the samples are paired, else of the medians. */
  ratio: number;
  /** Of the per-pair ratios; absent for unpaired rows. */
  spread?: Spread;
  /** The floor of the API's shape (raw + what the API must do anyway), measured in the same pairs. */
  shape?: { name: string; median: number; p99: number };
  /** Median of the per-pair ratios fullstop/shape floor. */
  shapeRatio?: number;
  shapeSpread?: Spread;
  better: 'lower' | 'higher';
  /** Extra facts for the row (goal, sub-figures, counts); printed under the table. */
  extra?: Record<string, unknown>;
}

export interface SuiteContext {
  /** Few samples: the whole run stays under 15 s. */
  quick: boolean;
  /** One progress line. */
  progress(message: string): void;
  /** Whether the run wants the row `id` (`--only`); absent means every row. Rows are filtered anyway. */
  wants?(id: string): boolean;
}

export interface Suite {
  name: string;
  /** The row ids this suite can produce: `--only ID` skips the suites that cannot produce ID. */
  ids?: readonly string[];
  run(ctx: SuiteContext): Promise<BenchResult[]>;
}

/** Nearest-rank quantile of sorted values. */
const quantile = (sorted: readonly number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;

/** Median and p99 of raw samples (any unit). */
export function summarize(samples: readonly number[]): { median: number; p99: number } {
  if (samples.length === 0) throw new RangeError('samples: expected at least one sample');
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

/** Median and spread of `a[i] / b[i]`: the verdict of paired samples. */
export function pairedRatio(a: readonly number[], b: readonly number[]): { ratio: number; spread: Spread } {
  if (a.length !== b.length || a.length === 0) {
    throw new RangeError(`samples: expected two non-empty series of one length, got ${a.length} and ${b.length}`);
  }
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  const spread = { min: r[0]!, q1: quantile(r, 0.25), q3: quantile(r, 0.75), max: r.at(-1)!, pairs: r.length };
  return { ratio: quantile(r, 0.5), spread };
}

export interface CompareOptions {
  /** Sample `i` of each side was taken in the same pair or round: the ratio is the median of per-pair ratios. */
  paired?: boolean;
  /** The API-shape floor, paired with the fullstop samples. */
  shape?: { name: string; samples: readonly number[] };
}

/** Build a row from raw samples of both sides. */
export function compare(
  head: Pick<BenchResult, 'id' | 'metric' | 'unit' | 'better'> & { extra?: Record<string, unknown> },
  fullstop: readonly number[],
  baselineName: string,
  baseline: readonly number[],
  options: CompareOptions = {},
): BenchResult {
  const f = summarize(fullstop);
  const b = summarize(baseline);
  const row: BenchResult = { ...head, fullstop: f, baseline: { name: baselineName, ...b }, ratio: f.median / b.median };
  if (options.paired === true) ({ ratio: row.ratio, spread: row.spread } = pairedRatio(fullstop, baseline));
  if (options.shape !== undefined) {
    row.shape = { name: options.shape.name, ...summarize(options.shape.samples) };
    ({ ratio: row.shapeRatio, spread: row.shapeSpread } = pairedRatio(fullstop, options.shape.samples));
  }
  return row;
}

/** One synchronous task of `sampleRounds`; `ops` operations a call (a batch: one timer read dwarfs a ns op). */
export interface SampledTask {
  name: string;
  fn: () => unknown;
  ops: number;
}

/**
 * Sample synchronous tasks with tinybench in rounds, the order rotating each round, so every task
 * of a comparison sees the same slice of noise. Returns, per task, one figure a round: the round's
 * median in **ns per operation** (index i of every series is round i: pass them as paired).
 */
export async function sampleRounds(
  tasks: readonly SampledTask[],
  options: { rounds: number; timeMs: number },
): Promise<Map<string, number[]>> {
  const { Bench } = await import('tinybench');
  const out = new Map<string, number[]>(tasks.map((t) => [t.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    const bench = new Bench({ time: options.timeMs, iterations: 16, warmup: round === 0, throws: true });
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[(i + round) % tasks.length]!;
      bench.add(task.name, task.fn);
    }
    await bench.run();
    for (const task of tasks) {
      const result = bench.getTask(task.name)!.result;
      if (!('latency' in result)) throw new Error(`${task.name}: tinybench ended in state ${result.state}`);
      out.get(task.name)!.push((result.latency.p50 * 1e6) / task.ops);
    }
  }
  return out;
}

/**
 * Take `pairs` pairs: each pair samples every side once, the side that goes first rotating. A side
 * returning `undefined` voids its whole pair (so the series stay index-aligned), and the pair is
 * retaken; more than a tenth void is a failure. `warmup` pairs first, unrecorded.
 */
export async function samplePairs(
  id: string,
  counts: { pairs: number; warmup: number },
  sides: Record<string, () => Promise<number | undefined>>,
): Promise<{ samples: Record<string, number[]>; voided: number }> {
  const names = Object.keys(sides);
  const samples = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  let voided = 0;
  for (let pair = 0, kept = 0; kept < counts.pairs; pair++) {
    const taken: number[] = [];
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + pair) % names.length]!;
      const sample = await sides[name]!();
      if (sample !== undefined) taken[names.indexOf(name)] = sample;
    }
    if (pair < counts.warmup) continue;
    if (taken.filter((x) => x !== undefined).length < names.length) {
      if (++voided > counts.pairs / 10 + 1) throw new Error(`${id}: ${voided} void pairs (a raw side never blocked before its wake)`);
      continue;
    }
    names.forEach((n, i) => samples[n]!.push(taken[i]!));
    kept++;
  }
  return { samples, voided };
}

/** Fresh handshake cells (bench/workers/protocol.ts) over a SharedArrayBuffer, shared with a worker. */
export function flagCells(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(16));
}

/** Resolves once the worker set `flags[READY]`; rejects if `settles` settles first (it died before). */
export async function ready(flags: Int32Array, settles: Promise<unknown>, what: string): Promise<void> {
  const wait = Atomics.waitAsync(flags, READY, 0);
  if (!wait.async) return;
  const early = settles.then(
    (v) => { if (Atomics.load(flags, READY) === 0) throw new Error(`${what}: settled before it was ready (value ${String(v)})`); },
    (e) => { throw new Error(`${what}: failed before it was ready`, { cause: e }); },
  );
  await Promise.race([wait.value, early]);
}

/** A leaked slot, bridge or owner would make a figure a lie (and is a bug to report). */
export function assertNothingLive(registry: { stats(): object }, id: string): void {
  const stats = registry.stats() as Record<string, number>;
  if (Object.values(stats).some((n) => n !== 0)) throw new Error(`${id}: left live: ${JSON.stringify(stats)}`);
}
