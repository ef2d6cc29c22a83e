/**
 * `fullstop probe`, run as users run it: the compiled CLI in its own process, against fixtures
 * whose stop behaviour is known (test/fixtures/probe/). Figures are checked against that known
 * behaviour with generous bounds only: the machine is shared, and a worker thread can be
 * descheduled for tens of ms at any moment. A gap of a task that checks every 1 ms is told from a
 * whole run (40 ms and more) by `ONE_MS_GAP`, not timed.
 */
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventually, isGone } from './support/leaks.js';
import { execContainment } from '../dist/src/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const cliPath = join(root, 'dist/src/cli/main.js');
const fixture = (name: string) => `test/fixtures/probe/${name}`;
/** Above a median gap of a task that checks every 1 ms on a loaded machine, below its whole run. */
const ONE_MS_GAP = 20;

interface Ran { code: number | null; signal: string | null; stdout: string; stderr: string; pid: number }

/** Start the CLI; `ran` settles when it exits; `kill()` ends it if a spec failed midway. */
function start(args: string[], env: NodeJS.ProcessEnv = process.env): { pid: number; ran: Promise<Ran>; kill(): void } {
  const child = spawn(process.execPath, [cliPath, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const ran = new Promise<Ran>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, pid: child.pid! })));
  const kill = () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); };
  return { pid: child.pid!, ran, kill };
}

const probe = (args: string[], env?: NodeJS.ProcessEnv) => start(['probe', ...args], env).ran;

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'fullstop-probe-'));
}

/** Run a probe that writes --json; return the JSON and the run. */
async function probeJson(args: string[], env?: NodeJS.ProcessEnv): Promise<{ json: any; ran: Ran }> {
  const dir = tmp();
  try {
    const file = join(dir, 'out.json');
    const ran = await probe([...args, '--json', file], env);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    return { json: JSON.parse(readFileSync(file, 'utf8')), ran };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function pidsIn(file: string): number[] {
  return readFileSync(file, 'utf8').split(/\s+/).filter(Boolean).map(Number);
}

describe('task mode', () => {
  it('a task that checks every 1 ms stops cooperatively in every run, with gaps of about 1 ms', async () => {
    const { json, ran } = await probeJson([fixture('checks-every-ms.mjs'), '--task', '{"ms":60}', '--runs', '8', '--grace', '200']);
    expect(Object.keys(json).sort()).toEqual(['cooperative', 'gapMs', 'graceMs', 'hard', 'latencyMs', 'mode', 'runs']);
    expect(json).toMatchObject({ mode: 'task', runs: 8, graceMs: 200, cooperative: 8, hard: 0 });
    expect(Object.keys(json.latencyMs)).toEqual(['p50', 'p90', 'p99', 'max']);
    // Every stop was cooperative: they came before the hard stop was due.
    expect(json.latencyMs.p50).toBeLessThan(json.graceMs);
    expect(json.latencyMs.p50).toBeLessThanOrEqual(json.latencyMs.p90);
    expect(json.latencyMs.p99).toBeLessThanOrEqual(json.latencyMs.max);
    expect(json.gapMs.median).toBeGreaterThan(0.8);
    expect(json.gapMs.median).toBeLessThan(ONE_MS_GAP);
    expect(json.gapMs.max).toBeGreaterThanOrEqual(json.gapMs.median);
    expect(ran.stdout).toMatch(/verdict: stops cooperatively in 100% of runs/);
  });

  it('--threads 2 runs the probe on two workers at once, with the same figures', async () => {
    const { json, ran } = await probeJson([fixture('checks-every-ms.mjs'), '--task', '{"ms":40}', '--runs', '6', '--grace', '200', '--threads', '2']);
    expect(json).toMatchObject({ mode: 'task', runs: 6, cooperative: 6, hard: 0 });
    expect(json.gapMs.median).toBeGreaterThan(0.8);
    expect(json.gapMs.median).toBeLessThan(ONE_MS_GAP);
    expect(ran.stdout).toMatch(/grace 200 ms, 2 threads/);
  });

  it('a task that never checks needs the hard stop in every run, and its one gap is its whole run', async () => {
    const dir = tmp();
    try {
      const svg = join(dir, 'h.svg');
      const { json, ran } = await probeJson([fixture('never-checks.mjs'), '--name', 'neverChecks', '--task', '{"ms":150}', '--runs', '4', '--grace', '10', '--svg', svg]);
      expect(json).toMatchObject({ mode: 'task', runs: 4, graceMs: 10, cooperative: 0, hard: 4 });
      // A hard stop waits out the grace first.
      expect(json.latencyMs.p50).toBeGreaterThanOrEqual(10);
      expect(json.gapMs.median).toBeGreaterThanOrEqual(148);
      expect(json.gapMs.median).toBeLessThan(10_000); // liveness: the hard stop did come
      expect(json.gapMs.max).toBeGreaterThanOrEqual(json.gapMs.median);
      expect(ran.stdout).toMatch(/verdict: never checks its token: 100% of stops needed the hard stop/);
      const text = readFileSync(svg, 'utf8');
      expect(text).toMatch(/^<svg /);
      expect(text.match(/fill="#c0392b"><title>/g)?.length).toBeGreaterThan(0);
      expect(text).not.toMatch(/fill="#2e8b57"><title>/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a task with one 50 ms stretch shows a longest gap of about 50 ms', async () => {
    const { json, ran } = await probeJson([fixture('one-stretch.mjs'), '--name', 'oneStretch', '--runs', '6', '--grace', '200']);
    expect(json.runs).toBe(6);
    expect(json.gapMs.max).toBeGreaterThanOrEqual(49);
    expect(json.gapMs.median).toBeGreaterThan(0.8);
    expect(json.gapMs.median).toBeLessThan(ONE_MS_GAP);
    expect(ran.stdout).toMatch(/longest ended at\s+test\/fixtures\/probe\/one-stretch\.mjs:\d+:\d+/);
  });

  it('names the check that ended the longest gap', async () => {
    // A stretch far longer than a busy machine's descheduling, so it is the longest gap for sure;
    // a grace longer than it, so no hard stop cuts it short.
    const { ran } = await probeJson([fixture('one-stretch.mjs'), '--name', 'oneStretch', '--task', '{"stretch":300}', '--runs', '2', '--grace', '400']);
    // The check right after the stretch (line 9: `if (isCancelled())`), through the relative import.
    expect(ran.stdout).toMatch(/longest ended at\s+test\/fixtures\/probe\/one-stretch\.mjs:9:7\n/);
    expect(ran.stdout).toMatch(/longest gap between checks 3\d\d ms \(it ends at test\/fixtures\/probe\/one-stretch\.mjs:9:7\)$/m);
  });

  it('works from a project that installed fullstop: its bin, and a module importing fullstop/worker from there', async () => {
    const project = tmp();
    try {
      mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true });
      symlinkSync(root, join(project, 'node_modules', 'fullstop'));
      symlinkSync(join('..', 'fullstop', 'dist', 'src', 'cli', 'main.js'), join(project, 'node_modules', '.bin', 'fullstop'));
      writeFileSync(join(project, 'tool.mjs'), [
        "import { checkpoint } from 'fullstop/worker';",
        'export function tool() { for (let i = 0; i < 50; i++) { const end = performance.now() + 1; while (performance.now() < end); checkpoint(); } }',
      ].join('\n'));
      const child = spawn(process.execPath, [join(project, 'node_modules', '.bin', 'fullstop'), 'probe', 'tool.mjs', '--name', 'tool', '--runs', '4', '--grace', '200', '--json', 'out.json'], { cwd: project, stdio: 'ignore' });
      const code = await new Promise((resolve) => child.on('close', resolve));
      expect(code).toBe(0);
      const json = JSON.parse(readFileSync(join(project, 'out.json'), 'utf8'));
      expect(json).toMatchObject({ mode: 'task', runs: 4, hard: 0 });
      // Checks were recorded: the module's fullstop/worker is the instance the probe rebinds.
      expect(json.gapMs.median).toBeGreaterThan(0.8);
      expect(json.gapMs.median).toBeLessThan(ONE_MS_GAP);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  it('Ctrl-C stops the probe: the pool is destroyed mid-task and the probe exits 130', async () => {
    const dir = tmp();
    let cli: ReturnType<typeof start> | undefined;
    try {
      const startedFile = join(dir, 'started');
      cli = start(['probe', fixture('never-checks.mjs'), '--name', 'neverChecks', '--task', JSON.stringify({ ms: 60_000, startedFile }), '--span', '2000000000', '--runs', '3']);
      await eventually(() => existsSync(startedFile), 15_000, 'the task to start');
      process.kill(cli.pid, 'SIGINT');
      const ran = await cli.ran;
      expect(ran.code).toBe(130);
      expect(ran.stderr).toBe('fullstop probe: interrupted; everything it started has been stopped\n');
      expect(ran.stdout).toBe('');
    } finally {
      cli?.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('exec mode', () => {
  it('a tree that ignores SIGTERM needs SIGKILL in every run where it was up, and nothing survives', async () => {
    const dir = tmp();
    try {
      const pids = join(dir, 'pids');
      // Left alone the tree would run 5 s; every cancel lands in its first second (--span), so
      // none can fall in its last moments, when it would end by itself within the grace.
      const { json, ran } = await probeJson(['--exec', `sh ${fixture('stubborn-tree.sh')} ${pids} 5`, '--span', '1000', '--runs', '3', '--grace', '30']);
      expect(Object.keys(json).sort()).toEqual(['cooperative', 'graceMs', 'hard', 'latencyMs', 'mode', 'runs', 'survivors']);
      // A cancel drawn in the shell's first milliseconds, before its trap is set, ends it with
      // SIGTERM; such a tree never writes its line. Every tree that was up (its line written, after
      // its traps) needed SIGKILL. So may one whose trap was set but whose line was not written
      // yet: under load the 30 ms grace can end in between, and the SIGKILL comes first.
      const trees = readFileSync(pids, 'utf8').split('\n').filter(Boolean).length;
      expect(trees).toBeGreaterThanOrEqual(1);
      expect(json).toMatchObject({ mode: 'exec', runs: 3, graceMs: 30, survivors: [] });
      expect(json.hard).toBeGreaterThanOrEqual(trees);
      expect(json.cooperative + json.hard).toBe(3);
      expect(json.latencyMs.max).toBeGreaterThanOrEqual(30); // a hard stop waits out the grace first
      expect(ran.stdout).toMatch(/verdict: needed SIGKILL in \d+% of runs .*; nothing survived/);
      // Every process of every run is really gone.
      const all = pidsIn(pids);
      expect(all.length).toBe(3 * trees);
      expect(all.filter((pid) => !isGone(pid))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a daemon that escapes the tree is reported by pid and command, then killed by the probe (process-group mode)', async () => {
    const env = { ...process.env, FULLSTOP_CONTAINMENT: 'process-group' };
    const { json, ran } = await probeJson(['--exec', `sh ${fixture('escapes.sh')} 0.3`, '--runs', '2', '--grace', '30'], env);
    // At least the uncancelled run's daemon: nothing stops it, and nothing can find it by ancestry.
    expect(json.survivors.length).toBeGreaterThanOrEqual(1);
    for (const pid of json.survivors) {
      expect(ran.stdout).toContain(`${pid} (sleep 30)`);
      expect(isGone(pid)).toBe(true);
    }
    expect(ran.stdout).toMatch(/SURVIVED the stop/);
  });

  it.runIf(execContainment() === 'cgroup')('in cgroup mode the same daemon dies with its tree: no survivor', async () => {
    const dir = tmp();
    const daemons = join(dir, 'daemons');
    try {
      const { json, ran } = await probeJson(['--exec', `sh ${fixture('escapes.sh')} 0.3 ${daemons}`, '--runs', '2', '--grace', '30']);
      expect(json.survivors).toEqual([]);
      expect(ran.stdout).not.toMatch(/SURVIVED the stop/);
      // Every daemon any run started is really gone, not merely unseen by the probe. The
      // uncancelled run always starts its daemon; a cancelled one may be stopped before it has
      // (its moment is drawn from the run's first milliseconds too, and a loaded shell is slow).
      const pids = pidsIn(daemons);
      expect(pids.length).toBeGreaterThanOrEqual(1);
      expect(pids.filter((pid) => !isGone(pid))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('Ctrl-C stops the probe and the tree it was running, SIGTERM-proof as it is', async () => {
    const dir = tmp();
    const pids = join(dir, 'pids');
    let cli: ReturnType<typeof start> | undefined;
    try {
      cli = start(['probe', '--exec', `sh ${fixture('stubborn-tree.sh')} ${pids} 100`, '--span', '2000000000', '--runs', '3', '--grace', '50']);
      await eventually(() => existsSync(pids) && pidsIn(pids).length >= 3, 15_000, 'the tree to start');
      process.kill(cli.pid, 'SIGINT');
      const ran = await cli.ran;
      expect(ran.code).toBe(130);
      expect(ran.stderr).toMatch(/^fullstop probe: interrupted/);
      expect(pidsIn(pids).filter((pid) => !isGone(pid))).toEqual([]);
    } finally {
      // A spec that failed midway must not leave its SIGTERM-proof tree behind.
      cli?.kill();
      if (existsSync(pids)) for (const pid of pidsIn(pids)) if (!isGone(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bad input', () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['a missing module', [fixture('nope.mjs')], /^fullstop probe: no such module: test\/fixtures\/probe\/nope\.mjs$/],
    ['a missing export', [fixture('never-checks.mjs'), '--name', 'nope'], /has no exported function "nope"$/],
    ['a module without a default export', [fixture('never-checks.mjs')], /has no exported function "default" .*--name$/],
    ['a task that throws when not cancelled', [fixture('throws.mjs')], /^fullstop probe: the task threw when not cancelled: RangeError: the widget count must be positive$/],
    ['a command that cannot start', ['--exec', 'no-such-command-for-fullstop --x'], /^fullstop probe: cannot start "no-such-command-for-fullstop --x": .*not found/],
    ['--runs 0', [fixture('throws.mjs'), '--runs', '0'], /^fullstop probe: --runs: expected a whole number from 1 to 100000, got "0"$/],
    ['--runs abc', ['--exec', 'true', '--runs', 'abc'], /--runs: expected a whole number/],
    ['--grace=-1', [fixture('throws.mjs'), '--grace=-1'], /^fullstop probe: --grace: expected milliseconds, 0 to 2147483647, got "-1"$/],
    ['--task that is not JSON', [fixture('throws.mjs'), '--task', '{x'], /^fullstop probe: --task: expected JSON, got "\{x"/],
    ['an unknown flag', [fixture('throws.mjs'), '--frobnicate'], /^fullstop probe: Unknown option '--frobnicate'/],
    ['--threads with --exec', ['--exec', 'true', '--threads', '2'], /--threads applies to a task module, not to --exec$/],
    ['--json into a missing directory', [fixture('throws.mjs'), '--json', '/nonexistent-dir/x.json'], /^fullstop probe: --json: no such directory: \/nonexistent-dir$/],
  ];
  it.concurrent.each(cases)('%s: one line on stderr, exit code 2, no stack trace', async (_what, args, message) => {
    const ran = await probe(args);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr.endsWith('\n')).toBe(true);
    expect(ran.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(ran.stderr.trimEnd()).toMatch(message);
    expect(ran.stderr).not.toMatch(/\n\s+at /);
  });
});
