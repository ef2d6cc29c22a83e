/**
 * scripts/bench-verdict.mjs reads each row's goal text and checks it against the row's own
 * figures: checked here on rows written by hand, where the verdict is known, and on the CLI's
 * refusal of no input.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'scripts', 'bench-verdict.mjs');
type Clause = { text: string; field?: string; op?: string; bound?: number };
const { parseGoal, checkRun, verdict } = (await import(script)) as {
  parseGoal(goal: string, unit: string): Clause[];
  checkRun(results: object[], only?: Set<string>): { checked: { key: string; value: number; met: boolean }[]; unchecked: string[] };
  verdict(runs: { name: string; results: object[] }[], only?: Set<string>): string[];
};

const row = (id: string, goal: string | undefined, figures: { ratio: number; shapeRatio?: number; median?: number; unit?: string }) => ({
  id, unit: figures.unit ?? 'µs', ratio: figures.ratio, shapeRatio: figures.shapeRatio, fullstop: { median: figures.median ?? 1, p99: 1 },
  baseline: { name: 'floor', median: 1, p99: 1 }, better: 'lower', extra: goal === undefined ? {} : { goal },
});

describe('scripts/bench-verdict.mjs', () => {
  it('reads every goal form the rows use, and leaves what is not a figure unchecked', () => {
    expect(parseGoal('shape ≤ 1.1×', 'µs')).toEqual([{ text: 'shape ≤ 1.1×', field: 'shapeRatio', op: '≤', bound: 1.1 }]);
    expect(parseGoal('≥ 0.95×', 'tasks/s')).toEqual([{ text: '≥ 0.95×', field: 'ratio', op: '≥', bound: 0.95 }]);
    expect(parseGoal('≤ 1/30', 'µs')[0]!.bound).toBeCloseTo(1 / 30, 12);
    // A time bound converts to the row's unit: 2 ms on a row in µs is 2000.
    expect(parseGoal('≤ 3×, ≤ 2 ms', 'µs')).toEqual([
      { text: '≤ 3×', field: 'ratio', op: '≤', bound: 3 }, { text: '≤ 2 ms', field: 'median', op: '≤', bound: 2000 }]);
    expect(parseGoal('ratio ≤ 1.25 and median ≤ 2000 µs', 'ms')).toEqual([
      { text: 'ratio ≤ 1.25', field: 'ratio', op: '≤', bound: 1.25 }, { text: 'median ≤ 2000 µs', field: 'median', op: '≤', bound: 2 }]);
    expect(parseGoal('≤ 1 ms, flat in N', 'ms')).toEqual([{ text: '≤ 1 ms', field: 'median', op: '≤', bound: 1 }, { text: 'flat in N', field: undefined }]);
    expect(parseGoal('≤ 2 Redis round trips added', 'µs')).toEqual([{ text: '≤ 2 Redis round trips added', field: undefined }]);
    // A time bound on a row not measured in time cannot be read from it.
    expect(parseGoal('≤ 2 ms', 'tasks/s')[0]!.field).toBeUndefined();
  });

  it('checks each clause against the row, both ways, on the bound itself too', () => {
    const { checked, unchecked } = checkRun([
      row('P3', 'shape ≤ 1.1×', { ratio: 1.5, shapeRatio: 1.1 }),
      row('R1', '≤ 1.15×', { ratio: 1.16, unit: 'ms' }),
      row('P5', '≥ 0.95×', { ratio: 0.949, unit: 'tasks/s' }),
      row('P6', '≤ 3×, ≤ 2 ms', { ratio: 1.2, median: 4.6, unit: 'ms' }),
      row('S1-0', '≤ 1 ms, flat in N', { ratio: 3, median: 0.7, unit: 'ms' }),
      row('R2', undefined, { ratio: 9 }),
    ]);
    expect(checked.map((c) => [c.key, c.met])).toEqual([
      ['P3 shape ≤ 1.1×', true], ['R1 ≤ 1.15×', false], ['P5 ≥ 0.95×', false], ['P6 ≤ 3×', true], ['P6 ≤ 2 ms', false], ['S1-0 ≤ 1 ms', true]]);
    expect(unchecked).toEqual(['S1-0: flat in N']);
    // A figure the row lacks is a miss, not a pass.
    expect(checkRun([row('P1', 'shape ≤ 1.25×', { ratio: 1 })]).checked[0]!.met).toBe(false);
  });

  it('tallies the runs, names the ones that met every goal, and narrows to --only', () => {
    const runs = [
      { name: 'a.json', results: [row('P3', 'shape ≤ 1.1×', { ratio: 1, shapeRatio: 1.05 }), row('R1', '≤ 1.15×', { ratio: 1.2 })] },
      { name: 'b.json', results: [row('P3', 'shape ≤ 1.1×', { ratio: 1, shapeRatio: 1.15 }), row('R1', '≤ 1.15×', { ratio: 1.1 })] },
      { name: 'c.json', results: [row('P3', 'shape ≤ 1.1×', { ratio: 1, shapeRatio: 1.08 }), row('R1', '≤ 1.15×', { ratio: 1.12 })] },
    ];
    const lines = verdict(runs);
    expect(lines).toContain('a.json: missed R1 ≤ 1.15× (1.200)');
    expect(lines).toContain('c.json: every goal met');
    expect(lines).toContain('P3 shape ≤ 1.1×: met in 2 of 3; median 1.080 (1.050–1.150)');
    expect(lines).toContain('R1 ≤ 1.15×: met in 2 of 3; median 1.120 (1.100–1.200)');
    expect(lines).toContain('every goal at once: in 1 of 3 (c.json)');
    expect(verdict(runs, new Set(['R1']))).toContain('every goal at once: in 2 of 3 (b.json, c.json)');
    // A goal whose row never carried its figure is a miss in every run, and says so.
    expect(verdict([{ name: 'd.json', results: [row('P1', 'shape ≤ 1.25×', { ratio: 1 })] }])).toContain('P1 shape ≤ 1.25×: met in 0 of 1; no figure in any run');
  });

  it('refuses no input and a file that is not a results JSON', async () => {
    const run = (args: string[]) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, [script, ...args], (error, _stdout, stderr) => resolve({ code: error ? (error.code as number) : 0, stderr }));
    });
    const none = await run([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/expected at least one results JSON/);
    const dir = mkdtempSync(join(tmpdir(), 'fullstop-verdict-'));
    try {
      writeFileSync(join(dir, 'x.json'), '{"rows":[]}');
      const wrong = await run([join(dir, 'x.json')]);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/expected a results JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
