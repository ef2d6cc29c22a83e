/**
 * The bench harness (`npm run bench`): the results JSON, the command line, running suites in
 * turn, the table, the SVG chart, and one real quick run of the CLI. Suites here are fakes with
 * fixed samples, so nothing but the smoke run measures anything.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compare, summarize, type BenchResult, type Suite } from '../dist/bench/harness.js';
import {
  buildDocument, formatTable, parseArgs, runSuites, selection, UsageError, validateResult, type SuiteEntry,
} from '../dist/bench/report.js';
import { escapeXml, renderSvg, toMicroseconds } from '../dist/bench/svg.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const env = { date: '2026-01-02T03:04:05.000Z', node: 'v20.20.2', cpus: 2 };

/** A suite that "measures" fixed samples: fullstop 1..5 µs against a baseline of 2..10 µs. */
const tinySuite: Suite = {
  name: 'tiny',
  ids: ['X1', 'X2'],
  async run(ctx) {
    const rows: BenchResult[] = [];
    if (ctx.wants?.('X1') !== false) {
      rows.push(compare({ id: 'X1', metric: 'fake wake', unit: 'µs', better: 'lower', extra: { note: 'fixed' } },
        [1, 2, 3, 4, 5], 'raw thing', [2, 4, 6, 8, 10]));
    }
    if (ctx.wants?.('X2') !== false) {
      rows.push(compare({ id: 'X2', metric: 'fake throughput', unit: 'tasks/s', better: 'higher' },
        [900], 'raw pool', [1000]));
    }
    return rows;
  },
};
const entry = (suite: Suite, stem = suite.name): SuiteEntry => ({ stem, load: async () => suite });
const quiet = () => {};

function goodRow(): BenchResult {
  return compare({ id: 'A1', metric: 'm', unit: 'ns', better: 'lower' }, [10], 'raw', [20]);
}

describe('the results JSON', () => {
  it('has exactly date, node, cpus and results, each row in the documented shape with the ratio of the medians', async () => {
    const { results } = await runSuites([entry(tinySuite)], { quick: true, only: [] }, quiet);
    const doc = JSON.parse(JSON.stringify(buildDocument(results, env)));

    expect(Object.keys(doc).sort()).toEqual(['cpus', 'date', 'node', 'results']);
    expect(doc.date).toBe(env.date);
    expect(doc.node).toBe('v20.20.2');
    expect(doc.cpus).toBe(2);
    expect(doc.results).toHaveLength(2);
    const [x1, x2] = doc.results;
    expect(Object.keys(x1).sort()).toEqual(['baseline', 'better', 'extra', 'fullstop', 'id', 'metric', 'ratio', 'unit']);
    expect(Object.keys(x2).sort()).toEqual(['baseline', 'better', 'fullstop', 'id', 'metric', 'ratio', 'unit']);
    expect(x1).toEqual({
      id: 'X1', metric: 'fake wake', unit: 'µs',
      fullstop: { median: 3, p99: 5 }, baseline: { name: 'raw thing', median: 6, p99: 10 },
      ratio: 0.5, better: 'lower', extra: { note: 'fixed' },
    });
    expect(x2.ratio).toBeCloseTo(0.9, 12);
    expect(x2.better).toBe('higher');
  });

  it('recomputes the ratio from the medians and drops fields outside the shape, whatever a suite returned', () => {
    const row = { ...goodRow(), ratio: 42, stray: true, fullstop: { median: 10, p99: 11, mean: 9 } } as BenchResult;
    const [written] = buildDocument([row], env).results;
    expect(written!.ratio).toBe(0.5);
    expect(written).not.toHaveProperty('stray');
    expect(written!.fullstop).toEqual({ median: 10, p99: 11 });
  });

  it('takes the median and the p99 of the raw samples of each side', () => {
    const samples = Array.from({ length: 200 }, (_, i) => i + 1);
    expect(summarize(samples)).toEqual({ median: 100, p99: 198 });
  });
});

describe('row validation', () => {
  it('accepts a well-formed row', () => {
    expect(validateResult(goodRow())).toEqual([]);
  });

  it('names every bad field: missing better, a NaN median, an empty baseline name, a zero baseline', () => {
    const bad = { ...goodRow(), better: 'faster', fullstop: { median: NaN, p99: 1 }, baseline: { name: '', median: 0, p99: 0 } };
    const problems = validateResult(bad).join('\n');
    expect(problems).toMatch(/A1: better: expected 'lower' or 'higher', got "faster"/);
    expect(problems).toMatch(/A1: fullstop\.median: expected a finite number/);
    expect(problems).toMatch(/A1: baseline\.name: expected a non-empty string/);
    expect(problems).toMatch(/A1: baseline\.median: is 0, so the ratio is undefined/);
    expect(validateResult(null)).toEqual(['expected a result object, got null']);
  });
});

describe('the command line', () => {
  it('defaults to every suite with full samples and no files', () => {
    expect(parseArgs([])).toEqual({ quick: false, only: [], json: undefined, svg: undefined, help: false });
  });

  it('reads --quick, repeated --only, and --json/--svg in both the spaced and the = form', () => {
    expect(parseArgs(['--quick', '--only', 'T1', '--only=token', '--json', 'out.json', '--svg=chart.svg'])).toEqual({
      quick: true, only: ['T1', 'token'], json: 'out.json', svg: 'chart.svg', help: false,
    });
  });

  it('rejects an unknown flag, a missing value and a value given to a switch with a UsageError naming it', () => {
    expect(() => parseArgs(['--fast'])).toThrow(UsageError);
    expect(() => parseArgs(['--fast'])).toThrow(/unknown argument "--fast"/);
    expect(() => parseArgs(['stray'])).toThrow(/unknown argument "stray"/);
    expect(() => parseArgs(['--json'])).toThrow(/--json: expected a value, got nothing/);
    expect(() => parseArgs(['--json', '--quick'])).toThrow(/--json: expected a value, got "--quick"/);
    expect(() => parseArgs(['--only='])).toThrow(/--only: expected a value/);
    expect(() => parseArgs(['--quick=yes'])).toThrow(/--quick: takes no value/);
  });
});

describe('--only', () => {
  it('matches row ids and suite names (or file stems) case-insensitively', () => {
    const s = selection(['t1']);
    expect(s.wants('T1')).toBe(true);
    expect(s.wants('T2')).toBe(false);
    expect(s.runs({ name: 'token', ids: ['T1', 'T2'] }, 'token')).toBe(true);
    expect(s.runs({ name: 'pool', ids: ['P1'] }, 'pool')).toBe(false);
    expect(selection(['POOL']).named({ name: 'pool' }, 'pool')).toBe(true);
    expect(selection(['exec']).named({ name: 'exec suite' }, 'exec')).toBe(true);
  });

  it('still runs a suite that declares no ids, since only running it can tell, and keeps only the wanted rows', async () => {
    const undeclared: Suite = { name: 'undeclared', run: tinySuite.run };
    const lines: string[] = [];
    const { results } = await runSuites([entry(undeclared)], { quick: true, only: ['X2'] }, (l) => lines.push(l));
    expect(results.map((r) => r.id)).toEqual(['X2']);
    expect(lines.join('\n')).toMatch(/declares no ids; running it to look for X2/);
  });

  it('skips a suite whose declared ids do not include the wanted id, without loading its rows', async () => {
    let ran = false;
    const other: Suite = { name: 'other', ids: ['Y1'], async run() { ran = true; return []; } };
    const { results } = await runSuites([entry(other), entry(tinySuite)], { quick: true, only: ['x1'] }, quiet);
    expect(ran).toBe(false);
    expect(results.map((r) => r.id)).toEqual(['X1']);
  });
});

describe('running suites in turn', () => {
  it('reports a suite that throws by name and error, and still runs the suites after it', async () => {
    const throwing: Suite = { name: 'broken', async run() { throw new Error('the worker would not start'); } };
    const lines: string[] = [];
    const { results, failures } = await runSuites(
      [entry(throwing), { stem: 'unloadable', load: async () => { throw new SyntaxError('bad file'); } }, entry(tinySuite)],
      { quick: true, only: [] },
      (l) => lines.push(l),
    );
    expect(failures.map((f) => f.suite)).toEqual(['broken', 'unloadable']);
    expect(String(failures[0]!.error)).toMatch(/the worker would not start/);
    expect(results.map((r) => r.id)).toEqual(['X1', 'X2']);
    expect(lines.join('\n')).toMatch(/\[1\/3\] broken: FAILED after .*the worker would not start/);
    expect(lines.join('\n')).toMatch(/\[3\/3\] tiny: 2 rows in/);
  });

  it('fails a suite that returns malformed rows instead of writing them', async () => {
    const malformed: Suite = { name: 'malformed', async run() { return [{ ...goodRow(), unit: '' }]; } };
    const { results, failures } = await runSuites([entry(malformed)], { quick: true, only: [] }, quiet);
    expect(results).toEqual([]);
    expect(String(failures[0]!.error)).toMatch(/invalid results: A1: unit: expected a non-empty string/);
  });

  it('prints one progress line per suite and passes --quick through', async () => {
    let quick: boolean | undefined;
    const probe: Suite = { name: 'probe', ids: ['Z1'], async run(ctx) { quick = ctx.quick; ctx.progress('halfway'); return []; } };
    const lines: string[] = [];
    await runSuites([entry(probe)], { quick: true, only: [] }, (l) => lines.push(l));
    expect(quick).toBe(true);
    expect(lines).toEqual([expect.stringMatching(/^\[1\/1\] probe: running \(quick\)…$/), '  probe: halfway', expect.stringMatching(/^\[1\/1\] probe: 0 rows in \d+\.\d s$/)]);
  });
});

describe('the printed table', () => {
  it('has one line per row with both medians, the ratio, which way is better and the note', async () => {
    const { results } = await runSuites([entry(tinySuite)], { quick: true, only: [] }, quiet);
    const lines = formatTable(results).split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^id\s+metric\s+fullstop median\s+p99\s+baseline\s+baseline median\s+p99\s+ratio\s+better\s+note$/);
    expect(lines[2]).toMatch(/^X1\s+fake wake\s+3\.00 µs\s+5\.00 µs\s+raw thing\s+6\.00 µs\s+10\.0 µs\s+0\.500×\s+lower\s+note=fixed$/);
    expect(lines[3]).toMatch(/X2 .* 900 tasks\/s .* 0\.900×\s+higher$/);
  });
});

/** Minimal XML check: every tag closes in order, attributes are quoted, text has no raw '<' or bare '&'. */
function parseXml(xml: string): { name: string; attrs: Record<string, string> }[] {
  const body = xml.replace(/^<\?xml[^?]*\?>\s*/, '');
  const elements: { name: string; attrs: Record<string, string> }[] = [];
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let at = 0;
  for (let m = tag.exec(body); m !== null; m = tag.exec(body)) {
    const text = body.slice(at, m.index);
    if (/[<>]/.test(text) || /&(?!(amp|lt|gt|quot|apos);)/.test(text)) throw new Error(`bad text: ${text}`);
    at = tag.lastIndex;
    const [, closing, name, rawAttrs, selfClosing] = m;
    if (closing) {
      if (stack.pop() !== name) throw new Error(`</${name}> closes the wrong element`);
      continue;
    }
    const attrs: Record<string, string> = {};
    for (const a of rawAttrs!.matchAll(/([\w:-]+)="([^"]*)"/g)) attrs[a[1]!] = a[2]!;
    elements.push({ name: name!, attrs });
    if (!selfClosing) stack.push(name!);
  }
  if (body.slice(at).trim() !== '') throw new Error(`trailing content: ${body.slice(at)}`);
  if (stack.length > 0) throw new Error(`unclosed: ${stack.join(', ')}`);
  return elements;
}

describe('the SVG chart', () => {
  const rows: BenchResult[] = [
    compare({ id: 'P1', metric: 'cancel wakes a sleeper', unit: 'µs', better: 'lower' }, [12], 'raw Atomics.notify', [10]),
    compare({ id: 'T2', metric: 'check', unit: 'ns', better: 'lower' }, [5], 'raw Atomics.load', [4]),
    compare({ id: 'SQ1', metric: 'a <loop> & "its" cancel', unit: 'ms', better: 'lower' }, [0.02], 'MessagePort', [40]),
    compare({ id: 'P5', metric: 'throughput', unit: 'tasks/s', better: 'higher' }, [900], 'raw piscina', [1000]),
  ];
  const svg = renderSvg(buildDocument(rows, env));
  const elements = parseXml(svg);

  it('is one well-formed standalone svg element with the SVG namespace', () => {
    expect(elements[0]!.name).toBe('svg');
    expect(elements[0]!.attrs.xmlns).toBe('http://www.w3.org/2000/svg');
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  });

  it('draws one fullstop bar and one baseline bar per time row, and none for other units', () => {
    const bars = elements.filter((e) => e.name === 'rect' && e.attrs.class?.startsWith('bar '));
    const count = (id: string, side: string) => bars.filter((b) => b.attrs['data-id'] === id && b.attrs.class === `bar ${side}`).length;
    for (const id of ['P1', 'T2', 'SQ1']) {
      expect(count(id, 'fullstop')).toBe(1);
      expect(count(id, 'baseline')).toBe(1);
    }
    expect(bars).toHaveLength(6);
    expect(bars.some((b) => b.attrs['data-id'] === 'P5')).toBe(false);
  });

  it('puts every unit on one µs log axis with a tick per decade from the smallest value to the largest', () => {
    // 4 ns = 0.004 µs … 40 ms = 40 000 µs: decades -3 … 5.
    const ticks = elements.filter((e) => e.name === 'line' && e.attrs.class === 'tick').map((e) => Number(e.attrs['data-decade']));
    expect(ticks).toEqual([-3, -2, -1, 0, 1, 2, 3, 4, 5]);
    const xs = elements.filter((e) => e.name === 'line' && e.attrs.class === 'tick').map((e) => Number(e.attrs.x1));
    const steps = xs.slice(1).map((x, i) => x - xs[i]!);
    for (const step of steps) expect(step).toBeCloseTo(steps[0]!, 0);
    expect(svg).toMatch(/>0\.001<\/text>/);
    expect(svg).toMatch(/>100,000<\/text>/);
    expect(svg).toMatch(/µs \(log scale\)/);
    expect(toMicroseconds(40, 'ms')).toBe(40_000);
    expect(toMicroseconds(5, 'tasks/s')).toBeUndefined();
  });

  it('has a legend and a title with the date and the Node version, and escapes text', () => {
    expect(svg).toMatch(/class="legend"/);
    expect(svg).toMatch(/>fullstop<\/text>/);
    expect(svg).toContain(env.date);
    expect(svg).toContain('Node v20.20.2');
    expect(svg).toContain('a &lt;loop&gt; &amp; &quot;its&quot; cancel');
    expect(escapeXml(`<a href='x'>&</a>`)).toBe('&lt;a href=&apos;x&apos;&gt;&amp;&lt;/a&gt;');
  });

  it('is still a valid document when no row is a time', () => {
    const empty = renderSvg(buildDocument([rows[3]!], env));
    expect(parseXml(empty)[0]!.attrs.xmlns).toBe('http://www.w3.org/2000/svg');
    expect(empty).toMatch(/no time results/);
  });
});

describe('the CLI', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  function cli(args: string[], timeout: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, ['dist/bench/run.js', ...args], { cwd: root, timeout, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        resolve({ code, stdout, stderr });
      });
    });
  }

  it('exits with code 2 and the usage on an unknown flag, before running anything', async () => {
    const { code, stderr } = await cli(['--fastest'], 10_000);
    expect(code).toBe(2);
    expect(stderr).toMatch(/unknown argument "--fastest"/);
    expect(stderr).toMatch(/usage: node dist\/bench\/run\.js/);
    expect(stderr).not.toMatch(/running/);
  });

  it('runs T1 alone with --quick in a few seconds and writes a JSON of the documented shape', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fullstop-bench-'));
    dirs.push(dir);
    const file = join(dir, 'out.json');
    const svg = join(dir, 'out.svg');
    const started = Date.now();
    const { code, stdout, stderr } = await cli(['--quick', '--only', 'T1', '--json', file, '--svg', svg], 20_000);
    expect({ code, stderr }).toEqual({ code: 0, stderr: expect.stringMatching(/token: running \(quick\)/) });
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(stdout).toMatch(/^T1\s+beginTurn\+endTurn cycle/m);

    const doc = JSON.parse(await readFile(file, 'utf8'));
    expect(Object.keys(doc).sort()).toEqual(['cpus', 'date', 'node', 'results']);
    expect(new Date(doc.date).toISOString()).toBe(doc.date);
    expect(doc.node).toBe(process.version);
    expect(Number.isInteger(doc.cpus) && doc.cpus >= 1).toBe(true);
    expect(doc.results).toHaveLength(1);
    const [t1] = doc.results;
    expect(t1).toMatchObject({ id: 'T1', unit: 'ns', better: 'lower', baseline: { name: 'new AbortController()' } });
    for (const n of [t1.fullstop.median, t1.fullstop.p99, t1.baseline.median, t1.baseline.p99]) expect(n).toBeGreaterThan(0);
    expect(t1.ratio).toBeCloseTo(t1.fullstop.median / t1.baseline.median, 9);
    expect(validateResult(t1)).toEqual([]);
    expect(parseXml(await readFile(svg, 'utf8'))[0]!.name).toBe('svg');
  });
});
