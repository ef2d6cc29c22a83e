// What every suite shares: the row (docs/benchmarks.md, "The JSON"), its statistics and the one
// runner. Sides are sampled in pairs because the machine is shared: a burst slows the whole pair.
import type { CancelToken, TurnRegistry } from '../src/index.js';

export type Spread = Record<'min' | 'q1' | 'q3' | 'max' | 'pairs', number>;
type Summary = { median: number; p99: number };

/** `ratio`: the median of per-pair ratios fullstop/baseline when paired (with their `spread`), else the ratio of the medians. */
export interface BenchResult {
  id: string; metric: string; unit: string; better: 'lower' | 'higher'; fullstop: Summary; baseline: { name: string } & Summary;
  ratio: number; spread?: Spread; shape?: { name: string } & Summary; shapeRatio?: number; shapeSpread?: Spread; extra?: Record<string, unknown>;
}

export type Head = Pick<BenchResult, 'id' | 'metric' | 'unit' | 'extra'> & { better?: BenchResult['better'] };

/** `wants(id)`: `--only`, so a suite can skip rows nobody asked for (rows are filtered afterwards anyway); `warmup`: `--warmup`. */
export type SuiteContext = { quick: boolean; warmup?: number; progress(message: string): void; wants(id: string): boolean };

/** Exported as `suite` by `bench/NAME.bench.ts`; the runner runs each group of row ids in a process of its own. */
export type Suite = { groups: readonly (readonly string[])[]; run(ctx: SuiteContext): Promise<BenchResult[]> };
/** Microseconds in one of each time unit a row may be in (`unit`). */
export const US_PER_UNIT: Readonly<Record<string, number>> = { ns: 1e-3, 'µs': 1, ms: 1e3, s: 1e6 };
/** The nearest-rank quantile `q` of an ascending, non-empty series: what every row's median and quartiles are. */
export const quantile = (sorted: readonly number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
const rotated = <T>(xs: readonly T[], by: number) => [...xs.slice(by % xs.length), ...xs.slice(0, by % xs.length)];
/** A uniformly random order: every element sorted by a random key of its own. */
export const shuffled = <T>(xs: readonly T[]) => xs.map((x) => ({ x, key: Math.random() })).sort((a, b) => a.key - b.key).map(({ x }) => x);

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new RangeError('samples: expected at least one sample');
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

export const median = (samples: readonly number[]) => summarize(samples).median;

export function pairedRatio(a: readonly number[], b: readonly number[]): { ratio: number; spread: Spread } {
  if (a.length !== b.length || a.length === 0) throw new RangeError(`samples: expected two non-empty series of one length, got ${a.length} and ${b.length}`);
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  return { ratio: quantile(r, 0.5), spread: { min: r[0]!, q1: quantile(r, 0.25), q3: quantile(r, 0.75), max: r.at(-1)!, pairs: r.length } };
}

/** A row: paired (sample i of each side is from pair i) unless `paired: false`, the ratio of the medians. */
export function compare(head: Head, fullstop: readonly number[], [baselineName, baseline]: [string, readonly number[]],
  { paired = true, shape }: { paired?: boolean; shape?: [string, readonly number[]] } = {}): BenchResult {
  const [f, b] = [summarize(fullstop), summarize(baseline)];
  const row: BenchResult = { ...head, fullstop: f, baseline: { name: baselineName, ...b }, ratio: f.median / b.median, better: head.better ?? 'lower' };
  if (paired) ({ ratio: row.ratio, spread: row.spread } = pairedRatio(fullstop, baseline));
  if (shape !== undefined) {
    row.shape = { name: shape[0], ...summarize(shape[1]) };
    ({ ratio: row.shapeRatio, spread: row.shapeSpread } = pairedRatio(fullstop, shape[1]));
  }
  return row;
}

/**
 * The one runner, for latencies (pairs) and throughput (rounds): each pair samples every side once,
 * the first side rotating (`shuffle`: in a random order, so no side always runs after the same
 * other), after `warmup` unrecorded pairs (`ctx.warmup` if set). A side returning `undefined` voids
 * its whole pair (the series stay aligned), which is retaken; more voids than a tenth of `pairs` plus one fail.
 */
export async function samplePairs<S extends Record<string, unknown>>(id: string,
  { pairs, warmup: ownWarmup, shuffle = false }: { pairs: number; warmup: number; shuffle?: boolean },
  sides: { [K in keyof S]: (warmup: boolean) => Promise<S[K] | undefined> }, ctx?: SuiteContext) {
  const warmup = ctx?.warmup ?? ownWarmup;
  const names = Object.keys(sides) as (keyof S)[];
  ctx?.progress(`${id}: ${pairs} pairs (${warmup} to warm up) of ${names.join(', ')}`);
  const samples = Object.fromEntries(names.map((n) => [n, []])) as unknown as { [K in keyof S]: S[K][] };
  let voided = 0;
  for (let pair = 0, kept = 0; kept < pairs; pair++) {
    const taken = new Map<keyof S, unknown>();
    for (const name of shuffle ? shuffled(names) : rotated(names, pair)) {
      const sample = await sides[name](pair < warmup);
      if (sample !== undefined) taken.set(name, sample);
    }
    if (pair < warmup) continue;
    if (taken.size === names.length) {
      for (const n of names) samples[n].push(taken.get(n) as never);
      kept++;
    } else if (++voided > pairs / 10 + 1) throw new Error(`${id}: ${voided} void pairs (a raw side never blocked before its wake)`);
  }
  return { samples, voided };
}

/** Synchronous batches of `ops` operations in tinybench rounds, the order rotating; a round's median per task, ns an op. */
export async function sampleRounds(id: string, tasks: readonly { name: string; fn: () => unknown; ops: number }[],
  options: { rounds: number; timeMs: number; warmupMs: number }, ctx?: SuiteContext): Promise<Record<string, number[]>> {
  const { Bench } = await import('tinybench');
  ctx?.progress(`${id}: ${options.rounds} rounds of ${tasks.map((t) => t.name).join(', ')}`);
  const out = Object.fromEntries(tasks.map((t) => [t.name, [] as number[]]));
  for (let round = 0; round < options.rounds; round++) {
    const bench = new Bench({ time: options.timeMs, iterations: 16, warmup: round === 0, warmupTime: options.warmupMs, throws: true });
    for (const task of rotated(tasks, round)) bench.add(task.name, task.fn);
    await bench.run();
    for (const task of tasks) {
      const result = bench.getTask(task.name)!.result;
      if (!('latency' in result)) throw new Error(`${task.name}: tinybench ended in state ${result.state}`);
      out[task.name]!.push((result.latency.p50 * 1e6) / task.ops);
    }
  }
  return out;
}

export async function withTurn<T>(registry: TurnRegistry, session: string, fn: (token: CancelToken) => Promise<T>): Promise<T> {
  const token = registry.beginTurn(session);
  try {
    return await fn(token);
  } finally {
    registry.endTurn(session, token);
  }
}

/** A suite from its row groups, keyed by their ids ('P2 P2-plain'): only the groups `--only` wants run, in order, inside `around`. */
export function suiteOf(groups: Record<string, (ctx: SuiteContext) => Promise<BenchResult | BenchResult[]>>,
  around = (_ctx: SuiteContext, rows: () => Promise<BenchResult[]>) => rows()): Suite {
  const wanted = async (ctx: SuiteContext) => {
    const rows: BenchResult[] = [];
    for (const [ids, group] of Object.entries(groups)) if (ids.split(' ').some((id) => ctx.wants(id))) rows.push(...[await group(ctx)].flat());
    return rows;
  };
  return { groups: Object.keys(groups).map((ids) => ids.split(' ')), run: (ctx) => around(ctx, () => wanted(ctx)) };
}

/** A leaked slot, bridge or owner would make a figure a lie. */
export function assertNothingLive(registry: { stats(): object }, id: string): void {
  const stats = registry.stats() as Record<string, number>;
  if (Object.values(stats).some((n) => n !== 0)) throw new Error(`${id}: left live: ${JSON.stringify(stats)}`);
}
