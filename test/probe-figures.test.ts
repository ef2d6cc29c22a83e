/**
 * The probe's arithmetic, on figures made up to be known: the gap bins and their median, the
 * hard-stop rule for the longest gap, nearest-rank percentiles, and flag parsing.
 */
import { describe, expect, it } from 'vitest';
import { binMiddleMs, binOf, newRecord, T_CHECKS, T_LAST, T_MAX_GAP } from '../dist/workers/probe-record.js';
import { GapTally } from '../dist/src/cli/gaps.js';
import { percentiles } from '../dist/src/cli/stats.js';
import { parseProbeArgs, UsageError } from '../dist/src/cli/usage.js';
import { verdict } from '../dist/src/cli/table.js';
import { toResult } from '../dist/src/cli/result.js';

/** A record as the worker would leave it after closing `gaps` (ms), its last check at `last`. */
function recordOf(gaps: number[], last = 0) {
  const record = newRecord();
  const bins = new Float64Array(record.bins);
  for (const g of gaps) bins[binOf(g)]!++;
  const times = new Float64Array(record.times);
  times[T_LAST] = last;
  times[T_MAX_GAP] = Math.max(0, ...gaps);
  times[T_CHECKS] = gaps.length;
  return record;
}

describe('gap bins', () => {
  it('place a gap in a bin whose middle is within 2.2% of it, from 1 µs to hours', () => {
    for (const ms of [0.001, 0.0137, 0.5, 1, 3.3, 50, 999, 3_600_000]) {
      expect(Math.abs(binMiddleMs(binOf(ms)) - ms) / ms).toBeLessThan(0.022);
    }
    expect(binOf(0)).toBe(0);
    expect(binOf(Number.NaN)).toBe(0);
  });

  it('give the median of complete gaps and the exact longest one', () => {
    const tally = new GapTally();
    tally.add(recordOf([1, 1, 1, 1, 50]));
    tally.add(recordOf([1, 1, 2]));
    expect(tally.count).toBe(8);
    expect(tally.checks).toBe(8);
    expect(tally.medianMs()).toBeGreaterThan(0.98);
    expect(tally.medianMs()).toBeLessThan(1.02);
    expect(tally.maxMs).toBe(50);
  });

  it('count the stretch a hard stop cut short toward the longest gap only, not the median', () => {
    const tally = new GapTally();
    tally.add(recordOf([1, 1, 1], 1000), 1000 + 120);
    expect(tally.maxMs).toBe(120);
    expect(tally.site).toBe('(cut short by the hard stop)');
    expect(tally.count).toBe(3);
    expect(tally.medianMs()).toBeLessThan(1.02);
  });

  it('keep naming the end of the longest complete gap when a cut-short stretch measured longer', () => {
    const tally = new GapTally();
    const complete = recordOf([1, 50]);
    new TextEncoder().encodeInto('/x/tool.mjs:9:7', new Uint8Array(complete.site));
    tally.add(complete);
    tally.add(recordOf([1], 1000), 1000 + 61.5);
    expect(tally.maxMs).toBe(61.5);
    expect(tally.site).toBe('/x/tool.mjs:9:7');
  });
});

describe('percentiles', () => {
  it('are nearest-rank: every one is a measured value', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 .. 1, unsorted
    expect(percentiles(values)).toEqual({ p50: 50, p90: 90, p99: 99, max: 100 });
    expect(percentiles([7])).toEqual({ p50: 7, p90: 7, p99: 7, max: 7 });
    expect(percentiles([])).toEqual({ p50: 0, p90: 0, p99: 0, max: 0 });
  });
});

describe('flags', () => {
  it('default to 50 task runs or 20 exec runs, a 100 ms grace and one thread', () => {
    expect(parseProbeArgs(['test/fixtures/probe/throws.mjs'])).toMatchObject({ mode: 'task', runs: 50, graceMs: 100, threads: 1, name: 'default', spanMs: undefined });
    expect(parseProbeArgs(['--exec', 'make test'])).toMatchObject({ mode: 'exec', command: 'make test', runs: 20, graceMs: 100 });
  });

  it('refuse bad values with a UsageError naming the flag and the value', () => {
    expect(() => parseProbeArgs(['--exec', 'true', '--grace', 'soon'])).toThrow(new UsageError('--grace: expected milliseconds, 0 to 2147483647, got "soon"'));
    expect(() => parseProbeArgs(['--exec', 'true', '--span', '0'])).toThrow(/--span: expected milliseconds, above 0/);
    expect(() => parseProbeArgs(['--exec', 'true', '--runs', '1.5'])).toThrow(/--runs: expected a whole number from 1 to 100000, got "1.5"/);
    expect(() => parseProbeArgs(['a.mjs', 'b.mjs'])).toThrow(/expected one module, got 2/);
    expect(() => parseProbeArgs(['test/fixtures/probe/throws.mjs', '--exec', 'true'])).toThrow(/either a module or --exec/);
  });
});

describe('the verdict', () => {
  const task = parseProbeArgs(['test/fixtures/probe/throws.mjs', '--grace', '20']) as any;
  const exec = parseProbeArgs(['--exec', 'make', '--grace', '20']) as any;
  const runs = (hard: boolean[]) => hard.map((h, i) => ({ latencyMs: h ? 25 + i : 1 + i, hard: h }));
  const gaps = (maxMs: number, checks: number, site?: string) => { const g = new GapTally(); g.maxMs = maxMs; g.checks = checks; g.site = site; return g; };
  const say = (o: any, probe: any) => verdict(o, probe, toResult(o, probe));

  it('asks for a checkpoint before the check that ended a gap longer than the grace', () => {
    const probe = { spanMs: 100, unmeasured: 0, runs: runs([false, false, false, true]), gaps: gaps(52.8, 40, '/x/tool.mjs:9:7') };
    expect(say(task, probe)).toBe('needs the hard stop in 25% of runs (the worker is lost each time), p99 28.0 ms; longest gap between checks 52.8 ms: add a checkpoint in the stretch before /x/tool.mjs:9:7');
  });

  it('says a task that stops within the grace stops cooperatively, and names no fix', () => {
    const probe = { spanMs: 100, unmeasured: 0, runs: runs([false, false]), gaps: gaps(1.2, 200, '/x/tool.mjs:3:5') };
    expect(say(task, probe)).toBe('stops cooperatively in 100% of runs, p99 2.00 ms; longest gap between checks 1.20 ms (it ends at /x/tool.mjs:3:5)');
  });

  it('says a task that never checks must call checkpoint()', () => {
    const probe = { spanMs: 100, unmeasured: 0, runs: runs([true, true]), gaps: gaps(100, 0, '(the end of the task)') };
    expect(say(task, probe)).toMatch(/^never checks its token: 100% of stops needed the hard stop .*; call checkpoint\(\) in its loops$/);
  });

  it('names the survivors of a command', () => {
    const probe = { spanMs: 100, unmeasured: 0, baselineMs: 100, runs: runs([true]), survivors: [{ pid: 4242, command: 'sleep 30', start: '1' }] };
    expect(say(exec, probe)).toBe('needed SIGKILL in 100% of runs (SIGTERM did not end the tree within the 20.0 ms grace), tree gone p99 25.0 ms; 1 process SURVIVED the stop: 4242 (sleep 30)');
  });

  it('says so when no stop could be measured', () => {
    const probe = { spanMs: 5, unmeasured: 20, runs: [], gaps: gaps(5, 0) };
    expect(say(task, probe)).toMatch(/^no stop was measured: every run ended by itself/);
  });
});
