// `npm run bench`: every row group of every `dist/bench/*.bench.js` exporting `suite`, one after another (two at once
// would measure each other), each in a process of its own (in one process, a group's figures moved with the heap and
// JIT state the groups before it left; `--quick`, whose figures are never cited, runs here); one table, JSON and SVG.
import { execFile } from 'node:child_process';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { US_PER_UNIT, type BenchResult, type Suite } from './harness.js';

export const USAGE = `usage: node dist/bench/run.js [--quick] [--only ID_OR_SUITE]... [--warmup N] [--json FILE] [--svg FILE]
  --quick      few samples (the whole run stays under 15 s)
  --only X     only row id X (e.g. P1) or suite X (its file stem, e.g. pool); repeatable
  --warmup N   N unrecorded pairs before every paired row instead of its own count (with --only: a P5 pair is a round)
  --json FILE  write the results JSON { date, node, cpus, results }
  --svg FILE   write a log-scale bar chart of the rows measured in time
  --group G    (what the runner starts) run group G, "STEM:ID ID…", in this process and print its rows as JSON`;
export type ResultsDocument = { date: string; node: string; cpus: number; results: BenchResult[] };
const OPTIONS = { quick: { type: 'boolean' }, only: { type: 'string', multiple: true }, warmup: { type: 'string' }, json: { type: 'string' },
  svg: { type: 'string' }, group: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;

/** A row's problems (none if valid): tools read the JSON, so a row with a non-finite figure or a zero floor fails its suite. */
export function validateResult(r: BenchResult): string[] {
  const sides = Object.entries({ fullstop: r.fullstop, baseline: r.baseline, ...(r.shape ? { shape: r.shape } : {}) });
  const problems = sides.filter(([, v]) => !(Number.isFinite(v.median) && Number.isFinite(v.p99))).map(([k]) => `${k}.median and .p99: expected finite numbers`);
  if (r.baseline.median === 0) problems.push('baseline.median: is 0, so no ratio (put counts like that in extra)');
  if (!Number.isFinite(r.ratio)) problems.push(`ratio: expected a finite number, got ${r.ratio}`);
  return problems.map((p) => `${r.id}: ${p}`);
}

/** Three significant digits, thousands separated, no exponent. */
export function formatNumber(n: number): string {
  if (!Number.isFinite(n) || n === 0) return String(n);
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US');
  return n.toFixed(Math.min(6, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(n))))));
}

const ratioCell = (ratio: number | undefined, spread: BenchResult['spread']) =>
  ratio === undefined ? '' : `${formatNumber(ratio)}×${spread ? ` [${formatNumber(spread.q1)}–${formatNumber(spread.q3)}]` : ''}`;

/** One line a row (ratios with the quartiles of their per-pair ratios), then the notes. Not `console.table`: it quotes every string cell. */
export function formatTable(results: readonly BenchResult[]): string {
  const head = ['id', 'metric', 'fullstop', 'p99', 'baseline', 'median', 'ratio [IQR]', 'shape', 'shapeRatio [IQR]', 'better'];
  const cells = [head, ...results.map((r) => [
    r.id, r.metric, `${formatNumber(r.fullstop.median)} ${r.unit}`, formatNumber(r.fullstop.p99), r.baseline.name, formatNumber(r.baseline.median),
    ratioCell(r.ratio, r.spread), r.shape ? formatNumber(r.shape.median) : '', ratioCell(r.shapeRatio, r.shapeSpread), r.better])];
  const widths = head.map((_, c) => Math.max(...cells.map((row) => [...row[c]!].length)));
  const notes = results.filter((r) => r.extra).map((r) => `${r.id}: ${JSON.stringify(r.extra).replace(/"([^"]+)":/g, '$1=')}`);
  return [...cells.map((row) => row.map((cell, c) => cell.padEnd(widths[c]!)).join('  ').trimEnd()), '', ...notes].join('\n');
}

/** `--svg`: per time row, a fullstop bar and a baseline bar on one log axis, in µs. Standalone SVG. */
export function renderSvg(doc: ResultsDocument): string {
  const rows = doc.results.filter((r) => US_PER_UNIT[r.unit] !== undefined);
  const bars = rows.map((r) => [r.fullstop.median, r.baseline.median].map((v) => v * US_PER_UNIT[r.unit]!));
  const lo = Math.floor(Math.log10(Math.min(1, ...bars.flat().map((v) => Math.max(v, 1e-3)))));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(1, ...bars.flat()))));
  const x = (v: number) => 220 + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * 560;
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const h = 60 + rows.length * 34 + 30;
  const title = `fullstop (blue) vs baseline (grey), median µs, log scale — ${doc.date}, Node ${doc.node}, ${doc.cpus} CPUs`;
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="960" height="${h}" font-family="sans-serif" font-size="11">`,
    `<rect width="960" height="${h}" fill="#fff"/>`, `<text x="10" y="20" font-size="14">${esc(title)}</text>`];
  for (let k = lo, t = 10 ** k; k <= hi; t = 10 ** ++k) {
    out.push(`<line x1="${x(t)}" y1="40" x2="${x(t)}" y2="${h - 25}" stroke="#ddd"/><text x="${x(t)}" y="${h - 10}" text-anchor="middle">${t >= 1 ? t : t.toFixed(-k)}</text>`);
  }
  rows.forEach((r, i) => {
    const y = 45 + i * 34;
    out.push(`<text x="10" y="${y + 14}">${esc(`${r.id} ${r.metric}`.slice(0, 36))}</text>`, ...bars[i]!.map((v, s) =>
      `<rect x="220" y="${y + s * 14}" width="${Math.max(0.5, x(v) - 220).toFixed(1)}" height="12" fill="${s ? '#aaa' : '#1f77b4'}"/>` +
      `<text x="${(x(v) + 4).toFixed(1)}" y="${y + s * 14 + 10}">${esc(`${formatNumber(v)} µs${s ? ` ${r.baseline.name}` : ''}`.slice(0, 40))}</text>`));
  });
  return [...out, '</svg>', ''].join('\n');
}

async function main(): Promise<number> {
  let args, warmup: number | undefined;
  try {
    args = parseArgs({ options: OPTIONS }).values;
    if (args.warmup !== undefined && !/^\d{1,9}$/.test(args.warmup)) throw new RangeError(`--warmup: expected an integer ≥ 0, got ${JSON.stringify(args.warmup)}`);
    warmup = args.warmup === undefined ? undefined : Number(args.warmup);
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (args.help) return process.stdout.write(USAGE + '\n'), 0;
  const only = new Set((args.only ?? []).map((o) => o.toLowerCase()));
  const wants = (id: string) => only.size === 0 || only.has(id.toLowerCase());
  const log = (line: string) => process.stderr.write(line + '\n');
  const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
  // Made before measuring: a full run takes minutes, and must not lose its figures to a missing folder (bench-results/ on a fresh clone).
  for (const out of [args.json, args.svg]) if (out !== undefined) await mkdir(dirname(resolve(out)), { recursive: true });
  const load = async (file: string) => {
    const { suite } = (await import(new URL(file, import.meta.url).href)) as { suite?: Suite };
    if (typeof suite?.run !== 'function' || !Array.isArray(suite.groups)) throw new TypeError(`${file}: expected an export \`suite\` with \`groups\` and \`run\``);
    return suite;
  };
  /** Group "STEM:ID ID…" run in this process: what `--group` does in a child (never passed `--quick`), and `--quick` for a whole suite. */
  const inProcess = async (group: string) => {
    const [stem, ids] = [group.slice(0, group.indexOf(':')), new Set(group.slice(group.indexOf(':') + 1).split(' '))];
    const rows = await (await load(`${stem}.bench.js`)).run({ quick: args.quick === true, warmup, progress: (m) => log(`  ${stem}: ${m}`), wants: (id) => ids.has(id) });
    if (rows.some((r) => validateResult(r).length > 0)) throw new TypeError(`invalid rows: ${rows.flatMap(validateResult).join('; ')}`);
    return rows;
  };
  if (args.group !== undefined) return process.stdout.write(JSON.stringify(await inProcess(args.group))), 0;
  const inChild = (group: string) => new Promise<BenchResult[]>((resolve, reject) => {
    const argv = [...process.execArgv, fileURLToPath(import.meta.url), '--group', group, ...(warmup === undefined ? [] : ['--warmup', String(warmup)])];
    execFile(process.execPath, argv, { maxBuffer: 64 << 20 }, (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout)))).stderr!.pipe(process.stderr);
  });
  const files = (await readdir(new URL('.', import.meta.url))).filter((f) => f.endsWith('.bench.js')).sort();
  const [started, results, failures]: [number, BenchResult[], string[]] = [performance.now(), [], []];
  for (const file of files) {
    const stem = basename(file, '.bench.js');
    try {
      const whole = wants(stem);
      const groups = (await load(file)).groups.filter((ids) => whole || ids.some(wants));
      if (groups.length > 0) log(`${stem}: running${args.quick ? ' (quick)' : ''}…`);
      const t0 = performance.now();
      // --quick gives no verdicts: its suites run here, each as one group, which keeps it well under 15 s.
      const sample = args.quick ? inProcess : inChild;
      for (const ids of args.quick && groups.length > 0 ? [groups.flat()] : groups) results.push(...(await sample(`${stem}:${ids.join(' ')}`)).filter((r) => whole || wants(r.id)));
      if (groups.length > 0) log(`${stem}: ${groups.length} groups in ${seconds(t0)}`);
    } catch (error) {
      failures.push(`${stem}: ${(error as Error)?.stack ?? String(error)}`);
      log(`${stem}: FAILED`);
    }
  }
  if (only.size > 0 && results.length === 0 && failures.length === 0) return log(`bench: nothing matched --only ${[...only].join(', ')}`), 1;
  const doc: ResultsDocument = { date: new Date().toISOString(), node: process.version, cpus: availableParallelism(), results };
  process.stdout.write(`\nfullstop benchmarks · ${doc.date} · Node ${doc.node} · ${doc.cpus} CPUs\n\n${formatTable(results)}\n`);
  if (args.json !== undefined) await writeFile(args.json, JSON.stringify(doc, null, 2) + '\n');
  if (args.svg !== undefined) await writeFile(args.svg, renderSvg(doc));
  log(`\n${results.length} rows from ${files.length} suite files in ${seconds(started)}`);
  for (const f of failures) log(`FAILED ${f}`);
  return failures.length === 0 ? 0 : 1;
}

// Only as the CLI, so the test imports the functions above without running a benchmark.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const code = (process.exitCode = await main());
  // A suite that leaked a worker or a handle would keep the process alive: name it and exit.
  setTimeout(() => {
    const left = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'Timeout');
    process.stderr.write(`bench: a suite left live resources (${left.join(', ') || 'unnamed'}); exiting anyway\n`);
    process.exit(code === 0 ? 1 : code);
  }, 3000).unref();
}
