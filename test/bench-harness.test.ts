/**
 * The bench harness: the statistics behind every verdict (paired ratios and their spread), the
 * pairing that keeps series aligned, row validation, and the JSON shape of one real quick run.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertNothingLive, compare, pairedRatio, samplePairs, suiteOf, summarize, withTurn, type BenchResult } from '../dist/bench/harness.js';
import { TurnRegistry } from '../dist/src/index.js';
import { formatTable, renderSvg, validateResult } from '../dist/bench/run.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const head = { id: 'X1', metric: 'fake wake', unit: 'µs', better: 'lower' } as const;

describe('statistics', () => {
  it('summarize gives the nearest-rank median and p99 and refuses no samples', () => {
    const samples = Array.from({ length: 100 }, (_, i) => 100 - i); // 1..100, unsorted
    expect(summarize(samples)).toEqual({ median: 50, p99: 99 });
    expect(summarize([7])).toEqual({ median: 7, p99: 7 });
    expect(() => summarize([])).toThrow(RangeError);
  });

  it('a paired ratio is the median of per-pair ratios, not the ratio of medians, with its quartiles and extremes', () => {
    // Per pair: 0.5, 2, 0.1 → median 0.5; the medians alone (10 / 5) would say 2.
    const { ratio, spread } = pairedRatio([1, 10, 100], [2, 5, 1000]);
    expect(ratio).toBe(0.5);
    expect(spread).toEqual({ min: 0.1, q1: 0.1, q3: 2, max: 2, pairs: 3 });
    expect(() => pairedRatio([1, 2], [1])).toThrow(RangeError);
  });

  it('a burst of noise that slows whole pairs does not move the paired ratio, where the ratio of medians jumps', () => {
    // Pairs 4 and 5 were slowed tenfold on both sides, pair 3 on fullstop's side only.
    const base = [10, 10, 10, 100, 100];
    const fullstop = [11, 11, 110, 110, 110];
    expect(summarize(fullstop).median / summarize(base).median).toBe(11);
    const { ratio, spread } = pairedRatio(fullstop, base);
    expect(ratio).toBeCloseTo(1.1);
    expect(spread.max).toBeCloseTo(11);
  });

  it('compare pairs by default, takes the ratio of medians when unpaired, and adds the shape ratio only when asked', () => {
    const unpaired = compare({ ...head, better: 'higher' }, [1, 2, 3], ['raw', [2, 4, 6]], { paired: false });
    expect(unpaired).toEqual({ ...head, better: 'higher', fullstop: { median: 2, p99: 3 }, baseline: { name: 'raw', median: 4, p99: 6 }, ratio: 0.5 });
    const { better: _, ...noBetter } = head;
    const paired = compare({ ...noBetter, extra: { goal: 'g' } }, [3, 6, 9], ['raw', [1, 2, 3]], { shape: ['raw+throw', [2, 4, 6]] });
    expect(paired.better).toBe('lower');
    expect(paired.ratio).toBe(3);
    expect(paired.spread).toEqual({ min: 3, q1: 3, q3: 3, max: 3, pairs: 3 });
    expect(paired.shape).toEqual({ name: 'raw+throw', median: 4, p99: 6 });
    expect(paired.shapeRatio).toBe(1.5);
    expect(paired.extra).toEqual({ goal: 'g' });
  });
});

describe('pairing', () => {
  it('a void sample voids its whole pair, so every series stays index-aligned, and the order rotates', async () => {
    const order: string[] = [];
    let a = 0;
    let b = 0;
    const { samples, voided } = await samplePairs('X', { pairs: 3, warmup: 1 }, {
      a: async () => { order.push('a'); a++; return a === 3 ? undefined : a; }, // the 2nd recorded pair's a is void
      b: async () => { order.push('b'); return 100 + ++b; },
    });
    expect(voided).toBe(1);
    expect(samples).toEqual({ a: [2, 4, 5], b: [102, 104, 105] });
    expect(order.slice(0, 4)).toEqual(['a', 'b', 'b', 'a']);
  });

  it('each side is told whether its pair is a warm-up, and may sample objects to split afterwards', async () => {
    const seen: boolean[] = [];
    const { samples } = await samplePairs('X', { pairs: 2, warmup: 1 }, {
      a: async (warmup) => { seen.push(warmup); return { n: seen.length }; },
      b: async () => 1,
    });
    expect(seen).toEqual([true, false, false]);
    expect(samples).toEqual({ a: [{ n: 2 }, { n: 3 }], b: [1, 1] });
  });

  it('shuffle: every pair still samples each side once, in orders that vary (not the rotation)', async () => {
    const order: string[] = [];
    const side = (name: string) => async () => (order.push(name), 1);
    const pairs = 60;
    const { samples } = await samplePairs('X', { pairs, warmup: 0, shuffle: true }, { a: side('a'), b: side('b'), c: side('c') });
    expect(samples).toEqual({ a: Array(pairs).fill(1), b: Array(pairs).fill(1), c: Array(pairs).fill(1) });
    const perPair = Array.from({ length: pairs }, (_, i) => order.slice(3 * i, 3 * i + 3).join(''));
    expect(perPair.every((p) => [...p].sort().join('') === 'abc')).toBe(true);
    // The rotation gives abc, bca, cab, abc, …; 60 random pairs all matching it: (1/6)^60.
    expect(perPair.some((p, i) => p !== ['abc', 'bca', 'cab'][i % 3])).toBe(true);
    expect(new Set(perPair).size).toBeGreaterThan(3);
  });

  it('--warmup (ctx.warmup) replaces the row\'s own warm-up count, 0 included', async () => {
    for (const warmup of [3, 0]) {
      const seen: boolean[] = [];
      const ctx = { quick: false, warmup, progress: () => {}, wants: () => true };
      await samplePairs('X', { pairs: 2, warmup: 1 }, { a: async (w) => (seen.push(w), 1) }, ctx);
      expect(seen).toEqual([...Array<boolean>(warmup).fill(true), false, false]);
    }
  });

  it('withTurn ends its turn whether the body resolves or throws', async () => {
    const registry = new TurnRegistry();
    expect(await withTurn(registry, 's', async (token) => token.retired)).toBe(false);
    await expect(withTurn(registry, 's', async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(() => assertNothingLive(registry, 'X')).not.toThrow();
    const left = registry.beginTurn('left');
    expect(() => assertNothingLive(registry, 'X')).toThrow(/X: left live/);
    registry.endTurn('left', left);
  });

  it('suiteOf takes its groups of ids from the group keys and runs only the wanted groups, in order, inside around', async () => {
    const ran: string[] = [];
    const row = (id: string) => compare({ ...head, id }, [1], ['raw', [1]], { paired: false });
    const suite = suiteOf({
      A1: async () => (ran.push('A1'), row('A1')),
      'B1 B2': async () => (ran.push('B'), [row('B1'), row('B2')]),
    }, async (_, rows) => { ran.push('setup'); try { return await rows(); } finally { ran.push('teardown'); } });
    expect(suite.groups).toEqual([['A1'], ['B1', 'B2']]);
    const ctx = (only: string[]) => ({ quick: true, progress: () => {}, wants: (id: string) => only.length === 0 || only.includes(id) });
    expect((await suite.run(ctx([]))).map((r) => r.id)).toEqual(['A1', 'B1', 'B2']);
    expect(ran.splice(0)).toEqual(['setup', 'A1', 'B', 'teardown']);
    expect((await suite.run(ctx(['B2']))).map((r) => r.id)).toEqual(['B1', 'B2']); // the runner drops B1 afterwards
    expect(ran).toEqual(['setup', 'B', 'teardown']);
  });

  it('too many void pairs fail the row instead of measuring what is left', async () => {
    await expect(samplePairs('X', { pairs: 10, warmup: 0 }, { a: async () => undefined })).rejects.toThrow(/X: \d+ void pairs/);
  });
});

describe('rows, table and chart', () => {
  const row: BenchResult = compare(head, [3, 6], ['raw', [1, 2]]);

  it('validateResult accepts a good row and names each problem of a bad one', () => {
    expect(validateResult(row)).toEqual([]);
    const bad: BenchResult = { ...row, baseline: { name: 'raw', median: 0, p99: 0 }, shape: { name: 's', median: Number.POSITIVE_INFINITY, p99: 1 }, ratio: Number.NaN };
    const problems = validateResult(bad).join('\n');
    expect(problems).toMatch(/^X1: shape.median and .p99: expected finite numbers$/m);
    expect(problems).toMatch(/^X1: baseline.median: is 0/m);
    expect(problems).toMatch(/^X1: ratio: expected a finite number/m);
    expect(problems).not.toMatch(/fullstop/);
  });

  it('the table prints each ratio with the quartiles of its pairs, and the extras as notes', () => {
    const table = formatTable([row, compare({ ...head, id: 'X2', extra: { goal: '≤ 2×' } }, [5], ['raw', [10]], { paired: false })]);
    expect(table).toMatch(/^X1 .* 3.00× \[3.00–3.00\]/m);
    expect(table).toMatch(/^X2 .* 0.500× /m);
    expect(table).toMatch(/^X2: \{goal="≤ 2×"\}$/m);
  });

  it('the SVG has one bar per side of each time row and skips other units', () => {
    const doc = { date: 'd', node: 'v20', cpus: 2, results: [row, { ...row, id: 'X3', unit: 'tasks/s' }] };
    const svg = renderSvg(doc);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/<rect x="220"/g)).toHaveLength(2);
    expect(svg).not.toContain('X3');
  });
});

describe('the CLI', () => {
  // A runner that hangs is killed before the test's own timeout, so the test can still say what it left behind.
  // Every process this file's runs start carries this mark in its environment (forks inherit it), so
  // the leak check below finds this run's variants only, not those of another suite run beside it.
  const mark = `FULLSTOP_BENCH_TEST_RUN=${process.pid}-${Date.now()}`;
  const run = (args: string[]) => new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const env = { ...process.env, FULLSTOP_BENCH_TEST_RUN: mark.slice(mark.indexOf('=') + 1) };
    execFile(process.execPath, ['dist/bench/run.js', ...args], { cwd: root, timeout: 45_000, env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
  });

  it('writes the results JSON in its documented shape (one real quick row)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fullstop-bench-test-'));
    try {
      // In a folder that does not exist yet, as bench-results/ on a fresh clone.
      const file = join(dir, 'results', 'out.json');
      const { code, stderr } = await run(['--quick', '--only', 'T2', '--json', file]);
      expect(code, stderr).toBe(0);
      const doc = JSON.parse(await readFile(file, 'utf8'));
      expect(Object.keys(doc).sort()).toEqual(['cpus', 'date', 'node', 'results']);
      expect(doc.results.map((r: BenchResult) => r.id)).toEqual(['T2']);
      const [t2] = doc.results;
      expect(Object.keys(t2).sort()).toEqual(['baseline', 'better', 'extra', 'fullstop', 'id', 'metric', 'ratio', 'spread', 'unit']);
      expect(t2.ratio).toBeGreaterThan(0);
      expect(t2.spread.q1).toBeLessThanOrEqual(t2.ratio);
      expect(t2.spread.q3).toBeGreaterThanOrEqual(t2.ratio);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('measures P5 with each variant in a process of its own, and leaves none of them running', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fullstop-bench-test-'));
    // This run's variants' processes, by their command line (throughput.js) and this file's mark; a
    // pid gone meanwhile is not one.
    const variants = async () => (await readdir('/proc')).filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('bench/throughput.js') &&
          readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(mark);
      } catch {
        return false;
      }
    });
    let left: string[] = [];
    try {
      const file = join(dir, 'p5.json');
      const { code, stderr } = await run(['--quick', '--only', 'P5', '--only', 'P5-plain', '--only', 'P5-c4', '--json', file]);
      // Looked at before anything else: a variant that outlived the runner is the leak this test is for.
      left = await variants();
      expect(left).toEqual([]);
      expect(code, stderr).toBe(0);
      const rows: BenchResult[] = JSON.parse(await readFile(file, 'utf8')).results;
      expect(rows.map((r) => r.id)).toEqual(['P5', 'P5-plain', 'P5-c4']);
      for (const r of rows) {
        expect(r.extra).toMatchObject({ processesPerVariant: 1, rounds: 2 });
        expect(r.fullstop.median).toBeGreaterThan(0);
        expect(r.baseline.median).toBeGreaterThan(0);
      }
    } finally {
      for (const pid of left) process.kill(Number(pid), 'SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('exits 2 on a bad command line and 1 when --only matches nothing', async () => {
    expect((await run(['--bogus'])).code).toBe(2);
    for (const bad of ['-1', '1.5', 'many', '']) {
      const { code, stderr } = await run([`--warmup=${bad}`, '--only', 'T2']);
      expect(code).toBe(2);
      expect(stderr).toContain(`--warmup: expected an integer ≥ 0, got ${JSON.stringify(bad)}`);
    }
    expect((await run(['--only', 'NOPE'])).code).toBe(1);
  }, 60_000);
});
