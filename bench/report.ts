/**
 * The logic of `npm run bench`, free of files and processes: argument parsing, the `--only`
 * filter, running the suites in turn (`runSuites`), row validation, the results JSON and the
 * printed table. `run.ts` is the thin CLI around it (directory listing, imports, writes, exit
 * code), so all of this is tested on fake suites without running a benchmark.
 */

import type { BenchResult, Suite } from './harness.js';
import { describe } from '../src/errors.js';

export const USAGE = `usage: node dist/bench/run.js [--quick] [--only ID_OR_SUITE] [--json FILE] [--svg FILE]

  --quick        every suite with few samples (the whole run stays under 60 s)
  --only X       only row id X (e.g. T1) or suite X (e.g. token); repeatable
  --json FILE    write the results JSON { date, node, cpus, results } to FILE
  --svg FILE     write a log-scale bar chart of the time-unit rows to FILE
  --help         print this and exit`;

export interface CliOptions {
  quick: boolean;
  /** Row ids or suite names; empty means everything. */
  only: string[];
  /** `undefined`: no JSON file. */
  json: string | undefined;
  /** `undefined`: no SVG file. */
  svg: string | undefined;
  help: boolean;
}

/** A bad command line; the CLI prints it with the usage and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Parse `argv` (without node and the script). Accepts `--flag value` and `--flag=value`. */
export function parseArgs(argv: readonly string[]): CliOptions {
  const options: CliOptions = { quick: false, only: [], json: undefined, svg: undefined, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    const inline = eq === -1 ? undefined : arg.slice(eq + 1);
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '' || (inline === undefined && v.startsWith('--'))) {
        throw new UsageError(`${flag}: expected a value, got ${v === undefined ? 'nothing' : JSON.stringify(v)}`);
      }
      return v;
    };
    switch (flag) {
      case '--quick':
      case '--help':
      case '-h':
        if (inline !== undefined) throw new UsageError(`${flag}: takes no value, got ${JSON.stringify(inline)}`);
        if (flag === '--quick') options.quick = true;
        else options.help = true;
        break;
      case '--only':
        options.only.push(value());
        break;
      case '--json':
        options.json = value();
        break;
      case '--svg':
        options.svg = value();
        break;
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  return options;
}

/** What `--only` selects. Ids and suite names compare case-insensitively. */
export interface Selection {
  /** Whether a row is wanted. */
  wants(id: string): boolean;
  /**
   * Whether to run a suite at all: it is named, or it declares a wanted id, or it declares no ids
   * (then only running it can tell; its rows are filtered afterwards).
   */
  runs(suite: { name: string; ids?: readonly string[] }, fileStem: string): boolean;
  /** Whether the whole suite is wanted (named by `--only`), so none of its rows is filtered. */
  named(suite: { name: string }, fileStem: string): boolean;
}

export function selection(only: readonly string[]): Selection {
  const wanted = new Set(only.map((o) => o.toLowerCase()));
  const all = wanted.size === 0;
  const named = (suite: { name: string }, stem: string) =>
    all || wanted.has(suite.name.toLowerCase()) || wanted.has(stem.toLowerCase());
  return {
    named,
    wants: (id) => all || wanted.has(id.toLowerCase()),
    runs: (suite, stem) =>
      named(suite, stem) || suite.ids === undefined || suite.ids.some((id) => wanted.has(id.toLowerCase())),
  };
}

const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/**
 * The problems of one row a suite returned (empty when it is valid). Tools outside the repo read
 * the JSON, so a malformed row is a failure of its suite, not something to write half-right.
 */
export function validateResult(row: unknown): string[] {
  if (row === null || typeof row !== 'object') return [`expected a result object, got ${row === null ? 'null' : typeof row}`];
  const r = row as Partial<Record<keyof BenchResult, unknown>>;
  const problems: string[] = [];
  const where = isNonEmptyString(r.id) ? `${r.id}: ` : '';
  if (!isNonEmptyString(r.id)) problems.push(`id: expected a non-empty string, got ${JSON.stringify(r.id)}`);
  if (!isNonEmptyString(r.metric)) problems.push(`${where}metric: expected a non-empty string, got ${JSON.stringify(r.metric)}`);
  if (!isNonEmptyString(r.unit)) problems.push(`${where}unit: expected a non-empty string, got ${JSON.stringify(r.unit)}`);
  if (r.better !== 'lower' && r.better !== 'higher') {
    problems.push(`${where}better: expected 'lower' or 'higher', got ${JSON.stringify(r.better)}`);
  }
  const side = (name: 'fullstop' | 'baseline') => {
    const s = r[name] as Record<string, unknown> | undefined;
    if (s === null || typeof s !== 'object') return problems.push(`${where}${name}: expected an object, got ${JSON.stringify(s)}`);
    for (const key of ['median', 'p99']) {
      if (!isFiniteNumber(s[key])) problems.push(`${where}${name}.${key}: expected a finite number, got ${JSON.stringify(s[key])}`);
    }
    if (name === 'baseline' && !isNonEmptyString(s.name)) {
      problems.push(`${where}baseline.name: expected a non-empty string, got ${JSON.stringify(s.name)}`);
    }
  };
  side('fullstop');
  side('baseline');
  const baseline = r.baseline as { median?: unknown } | undefined;
  if (isFiniteNumber(baseline?.median) && baseline.median === 0) {
    problems.push(`${where}baseline.median: is 0, so the ratio is undefined (put counts like that in extra)`);
  }
  if (r.extra !== undefined && (r.extra === null || typeof r.extra !== 'object' || Array.isArray(r.extra))) {
    problems.push(`${where}extra: expected a plain object, got ${JSON.stringify(r.extra)}`);
  }
  return problems;
}

export interface RunEnvironment {
  /** ISO 8601. */
  date: string;
  /** `process.version`. */
  node: string;
  /** Logical CPUs (`os.availableParallelism()`). */
  cpus: number;
}

export interface ResultsDocument extends RunEnvironment {
  results: BenchResult[];
}

/**
 * The results JSON. Each row is rebuilt key by key, so the file has exactly the documented shape
 * whatever else a suite put on its objects, and `ratio` is recomputed from the medians (the
 * definition, whatever the suite computed).
 */
export function buildDocument(results: readonly BenchResult[], env: RunEnvironment): ResultsDocument {
  return {
    date: env.date,
    node: env.node,
    cpus: env.cpus,
    results: results.map((r) => {
      const row: BenchResult = {
        id: r.id,
        metric: r.metric,
        unit: r.unit,
        fullstop: { median: r.fullstop.median, p99: r.fullstop.p99 },
        baseline: { name: r.baseline.name, median: r.baseline.median, p99: r.baseline.p99 },
        ratio: r.fullstop.median / r.baseline.median,
        better: r.better,
      };
      if (r.extra !== undefined) row.extra = r.extra;
      return row;
    }),
  };
}

/** Three significant digits, no exponent for the magnitudes benchmarks produce. */
export function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (n === 0) return '0';
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString('en-US');
  const digits = Math.max(0, 2 - Math.floor(Math.log10(abs)));
  return n.toFixed(Math.min(digits, 6));
}

/** A ratio as `0.87×`; tiny ones keep their magnitude (`0.00012×`). */
export function formatRatio(ratio: number): string {
  return `${formatNumber(ratio)}×`;
}

/** A row's `extra` as one short note: `k=v, k=v`. */
export function formatNote(extra: Record<string, unknown> | undefined): string {
  if (extra === undefined) return '';
  return Object.entries(extra)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : formatNumber(v)) : typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

const COLUMNS = ['id', 'metric', 'fullstop median', 'p99', 'baseline', 'baseline median', 'p99', 'ratio', 'better', 'note'] as const;

/** The printed table: one line a row, columns padded; numbers right-aligned. */
export function formatTable(results: readonly BenchResult[]): string {
  const cells = results.map((r) => [
    r.id,
    r.metric,
    `${formatNumber(r.fullstop.median)} ${r.unit}`,
    `${formatNumber(r.fullstop.p99)} ${r.unit}`,
    r.baseline.name,
    `${formatNumber(r.baseline.median)} ${r.unit}`,
    `${formatNumber(r.baseline.p99)} ${r.unit}`,
    formatRatio(r.fullstop.median / r.baseline.median),
    r.better,
    formatNote(r.extra),
  ]);
  const numeric = new Set([2, 3, 5, 6, 7]);
  const widths = COLUMNS.map((h, c) => Math.max(h.length, ...cells.map((row) => [...row[c]!].length)));
  const line = (row: readonly string[]) =>
    row
      .map((cell, c) => {
        const pad = ' '.repeat(widths[c]! - [...cell].length);
        return numeric.has(c) ? pad + cell : c === row.length - 1 ? cell : cell + pad;
      })
      .join('  ')
      .trimEnd();
  return [line(COLUMNS), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** A suite file found by the CLI; `load` imports it (a file that fails to load is a failure too). */
export interface SuiteEntry {
  /** File name without `.bench.js`; `--only` accepts it as well as the suite's name. */
  stem: string;
  load(): Promise<Suite>;
}

export interface SuiteFailure {
  suite: string;
  error: unknown;
}

export interface RunOutcome {
  results: BenchResult[];
  failures: SuiteFailure[];
}

/**
 * Run the selected suites one after another (never concurrently: they would measure each other).
 * A suite that fails to load, throws, or returns invalid rows is recorded and the next one still
 * runs; its rows are dropped whole, because a half-valid suite is not a result.
 */
export async function runSuites(
  entries: readonly SuiteEntry[],
  options: Pick<CliOptions, 'quick' | 'only'>,
  log: (line: string) => void,
  clock: () => number = () => performance.now(),
): Promise<RunOutcome> {
  const select = selection(options.only);
  const results: BenchResult[] = [];
  const failures: SuiteFailure[] = [];
  for (const [n, entry] of entries.entries()) {
    const tag = `[${n + 1}/${entries.length}] ${entry.stem}`;
    let suite: Suite;
    try {
      suite = await entry.load();
    } catch (error) {
      log(`${tag}: FAILED to load: ${describeError(error, true)}`);
      failures.push({ suite: entry.stem, error });
      continue;
    }
    if (!select.runs(suite, entry.stem)) {
      log(`${tag}: skipped (--only)`);
      continue;
    }
    const whole = select.named(suite, entry.stem);
    if (!whole && suite.ids === undefined) log(`${tag}: declares no ids; running it to look for ${options.only.join(', ')}`);
    log(`${tag}: running${options.quick ? ' (quick)' : ''}…`);
    const t0 = clock();
    try {
      const rows: unknown = await suite.run({
        quick: options.quick,
        progress: (message) => log(`  ${suite.name}: ${message}`),
        wants: whole ? () => true : select.wants,
      });
      if (!Array.isArray(rows)) throw new TypeError(`run() resolved with ${describe(rows)}, expected an array of results`);
      const problems = rows.flatMap((row) => validateResult(row));
      if (problems.length > 0) throw new TypeError(`invalid results: ${problems.join('; ')}`);
      const kept = (rows as BenchResult[]).filter((r) => whole || select.wants(r.id));
      results.push(...kept);
      log(`${tag}: ${kept.length} row${kept.length === 1 ? '' : 's'} in ${seconds(clock() - t0)}`);
    } catch (error) {
      log(`${tag}: FAILED after ${seconds(clock() - t0)}: ${describeError(error, true)}`);
      failures.push({ suite: suite.name, error });
    }
  }
  return { results, failures };
}

export function describeError(error: unknown, stack = false): string {
  if (!(error instanceof Error)) return String(error);
  return (stack ? error.stack : undefined) ?? `${error.name}: ${error.message}`;
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
