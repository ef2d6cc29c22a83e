/**
 * The contract every suite in bench/ follows and the sampling they share (bench/run.ts runs them).
 * Each fullstop figure is measured against a floor *in the same run*, pair by pair, because this
 * machine is shared and noisy: a neighbour that slows pair 3 slows both sides of pair 3.
 */

import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { CancelToken, TurnRegistry } from '../src/index.js';
import type { TokenHandle } from '../workers/runtime.js';

/** Spread of the per-pair ratios behind `ratio`: quartiles and extremes, and how many pairs. */
export type Spread = Record<'min' | 'q1' | 'q3' | 'max' | 'pairs', number>;
type Summary = { median: number; p99: number };

/**
 * One row of the results JSON (docs/benchmarks.md, "The JSON"). `ratio`: the median of per-pair
 * ratios fullstop/baseline when paired (with their `spread`), else the ratio of the medians.
 * `shape`: the floor of the API's shape, in the same pairs. `extra`: facts printed under the table.
 */
export interface BenchResult {
  id: string;
  metric: string;
  unit: string;
  fullstop: Summary;
  baseline: { name: string } & Summary;
  ratio: number;
  spread?: Spread;
  shape?: { name: string } & Summary;
  shapeRatio?: number;
  shapeSpread?: Spread;
  better: 'lower' | 'higher';
  extra?: Record<string, unknown>;
}

/** `quick`: few samples (the whole run under 15 s); `wants(id)`: `--only` (rows are filtered afterwards anyway). */
export type SuiteContext = { quick: boolean; progress(message: string): void; wants(id: string): boolean };

/** `ids`: the rows it can produce, so `--only ID` skips the suites that cannot. */
export type Suite = { name: string; ids: readonly string[]; run(ctx: SuiteContext): Promise<BenchResult[]> };

/** Nearest-rank quantile of sorted values. */
const quantile = (sorted: readonly number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;

/** Median and p99 of raw samples (any unit). */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new RangeError('samples: expected at least one sample');
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}
export const median = (samples: readonly number[]) => summarize(samples).median;

/** Median and spread of `a[i] / b[i]`: the verdict of paired samples. */
export function pairedRatio(a: readonly number[], b: readonly number[]): { ratio: number; spread: Spread } {
  if (a.length !== b.length || a.length === 0) {
    throw new RangeError(`samples: expected two non-empty series of one length, got ${a.length} and ${b.length}`);
  }
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  return { ratio: quantile(r, 0.5), spread: { min: r[0]!, q1: quantile(r, 0.25), q3: quantile(r, 0.75), max: r.at(-1)!, pairs: r.length } };
}

/** Build a row from both sides' samples; `paired`: sample i of each side is from pair i. */
export function compare(
  head: Pick<BenchResult, 'id' | 'metric' | 'unit' | 'better' | 'extra'>,
  fullstop: readonly number[],
  baselineName: string,
  baseline: readonly number[],
  options: { paired?: boolean; shape?: { name: string; samples: readonly number[] } } = {},
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

/**
 * Sample synchronous batches of `ops` operations with tinybench in rounds, the order rotating, so
 * every task sees the same noise; per task one figure a round (its median, ns per operation).
 */
export async function sampleRounds(
  tasks: readonly { name: string; fn: () => unknown; ops: number }[],
  options: { rounds: number; timeMs: number },
): Promise<Map<string, number[]>> {
  const { Bench } = await import('tinybench');
  const out = new Map<string, number[]>(tasks.map((t) => [t.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    const bench = new Bench({ time: options.timeMs, iterations: 16, warmup: round === 0, throws: true });
    for (const task of [...tasks.slice(round % tasks.length), ...tasks.slice(0, round % tasks.length)]) bench.add(task.name, task.fn);
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
 * The paired runner (latencies in pairs, throughput in rounds): each pair samples every side once,
 * the first side rotating. A side returning `undefined` voids its whole pair (the series stay
 * aligned) and the pair is retaken; over a tenth void fails. `warmup` pairs first, unrecorded.
 */
export async function samplePairs<S extends Record<string, unknown>>(
  id: string,
  counts: { pairs: number; warmup: number },
  sides: { [K in keyof S]: (warmup: boolean) => Promise<S[K] | undefined> },
): Promise<{ samples: { [K in keyof S]: S[K][] }; voided: number }> {
  const names = Object.keys(sides) as (keyof S)[];
  const samples = Object.fromEntries(names.map((n) => [n, []])) as unknown as { [K in keyof S]: S[K][] };
  let voided = 0;
  for (let pair = 0, kept = 0; kept < counts.pairs; pair++) {
    const taken = new Map<keyof S, unknown>();
    for (let k = 0; k < names.length; k++) {
      const name = names[(k + pair) % names.length]!;
      const sample = await sides[name](pair < counts.warmup);
      if (sample !== undefined) taken.set(name, sample);
    }
    if (pair < counts.warmup) continue;
    if (taken.size < names.length) {
      if (++voided > counts.pairs / 10 + 1) throw new Error(`${id}: ${voided} void pairs (a raw side never blocked before its wake)`);
      continue;
    }
    for (const n of names) samples[n].push(taken.get(n) as never);
    kept++;
  }
  return { samples, voided };
}

// What main and the workers (bench/workers/) agree on. The clock: `process.hrtime.bigint()`, one
// monotonic clock for every thread of the process, so stamps from two threads subtract directly.
export const now = () => process.hrtime.bigint();
export const usSince = (t0: bigint, t1: bigint) => Number(t1 - t0) / 1000;
/** Handshake cells over a SharedArrayBuffer: READY, set by a worker where the sample starts; GO, the raw floors' "go"; SPARE, never written (a timed sleep). */
export const flagCells = () => new Int32Array(new SharedArrayBuffer(16));
export const [READY, GO, SPARE] = [0, 1, 2];
/** P3: the worker trips the turn after TRIP_AFTER_MS (main is idle by then) and lingers LINGER_MS (its reply cannot come first). */
export const [TRIP_AFTER_MS, LINGER_MS] = [2, 5];
/** SQ1: iterations between two token polls. */
export const POLL_EVERY = 1000;
/** Main → raw worker (bench/workers/raw.ts says what each kind does): one floor sample. */
export type RawCommand =
  | { kind: 'wait' | 'poll' | 'notify'; shape?: boolean }
  | { kind: 'loop'; id: number; loopMs: number; handle?: TokenHandle }
  | { kind: 'cancel'; id: number };
/** Raw worker → main: its stamp; `ok` false if it woke from no block (or SQ1's loop ran out); `loopEndedAt`: SQ1. */
export type RawReport = { at: bigint; ok: boolean; sink: number; loopEndedAt?: bigint };

/** Main's pause after a worker's "ready" before it acts, so the worker is really blocked or spinning. */
export const settle = () => delay(1);

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

/** The raw floors' plain worker (bench/workers/raw.ts). */
export class RawWorker {
  readonly flags = flagCells();
  readonly worker = new Worker(new URL('./workers/raw.js', import.meta.url), { workerData: { flags: this.flags } });
  readonly online = once(this.worker, 'online');

  /** Post one command; `act` runs once the worker is ready; resolves with its report and act's value. */
  async sample<A>(command: RawCommand, act: () => A | Promise<A>): Promise<{ report: RawReport; acted: A }> {
    Atomics.store(this.flags, READY, 0);
    Atomics.store(this.flags, GO, 0);
    const report = once(this.worker, 'message') as Promise<[RawReport]>;
    this.worker.postMessage(command);
    await ready(this.flags, report, `raw ${command.kind}`);
    const acted = await act();
    return { report: (await report)[0], acted };
  }

  /** Main flips GO (and notifies) once the worker settled: µs to its stamp, or undefined (void) if it woke from no block. */
  async flip(command: RawCommand): Promise<number | undefined> {
    const { report, acted: t0 } = await this.sample(command, async () => {
      await settle();
      const t0 = now();
      Atomics.store(this.flags, GO, 1);
      Atomics.notify(this.flags, GO);
      return t0;
    });
    return report.ok ? usSince(t0, report.at) : undefined;
  }

  close = () => this.worker.terminate();
}

/** `fn(token)` under a fresh turn of `session`, ended after. */
export async function withTurn<T>(registry: TurnRegistry, session: string, fn: (token: CancelToken) => Promise<T>): Promise<T> {
  const token = registry.beginTurn(session);
  try {
    return await fn(token);
  } finally {
    registry.endTurn(session, token);
  }
}

/** A leaked slot, bridge or owner would make a figure a lie (and is a bug to report). */
export function assertNothingLive(registry: { stats(): object }, id: string): void {
  const stats = registry.stats() as Record<string, number>;
  if (Object.values(stats).some((n) => n !== 0)) throw new Error(`${id}: left live: ${JSON.stringify(stats)}`);
}
