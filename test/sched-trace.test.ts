/**
 * scripts/sched-trace.mjs reads a scheduler trace against its child's log: checked here on a
 * trace written by hand, where the answer is known (a wakee that preempts main on main's CPU for
 * 53 µs; one sent to the other CPU because another thread was runnable on main's). The traced run
 * itself needs perf and root, so it is not part of `npm test` (docs/benchmarks.md); the script's
 * figures use the bench's quantile from the build, which `npm test` makes first.
 */
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'scripts', 'sched-trace.mjs');
const { analyse, readTrace } = (await import(script)) as {
  analyse(log: object, events: object[]): string;
  readTrace(text: string): object[];
};

const ns = (us: number) => String(us * 1000);
const line = (comm: string, tid: number, cpu: number, us: number, event: string, fields: string) =>
  `${comm.padStart(16)} ${String(tid).padStart(6)} [${String(cpu).padStart(3, '0')}] ${(us / 1e6).toFixed(6)}: sched:${event}: ${fields}`;
const waking = (tid: number, cpu: number, us: number, wakee: number) => line('node', tid, cpu, us, 'sched_waking', `comm=node pid=${wakee} prio=120 target_cpu=${String(cpu).padStart(3, '0')}`);
const sw = (cpu: number, us: number, prev: number, state: string, next: number) =>
  line(prev === 0 ? 'swapper/0' : 'node', prev, cpu, us, 'sched_switch', `prev_comm=node prev_pid=${prev} prev_prio=120 prev_state=${state} ==> next_comm=node next_pid=${next} next_prio=120`);

// main 100 on CPU 1; the stopped task's worker 200; the floor's worker 300; 400 a thread left runnable.
const trace = [
  sw(1, 900, 0, 'R', 100),
  waking(100, 1, 1001, 200), sw(1, 1002, 100, 'R', 200), sw(1, 1055, 200, 'S', 100),
  sw(1, 1990, 400, 'R', 100),
  waking(100, 1, 2001, 300), sw(0, 2040, 0, 'R', 300),
  // 500 went to sleep on main's CPU: asleep is not runnable, so this wake finds main's CPU free.
  sw(1, 5180, 100, 'S', 500), sw(1, 5190, 500, 'S', 100),
  waking(100, 1, 5201, 600), sw(1, 5203, 100, 'R', 600), sw(1, 5210, 600, 'S', 100),
].join('\n');
const log = {
  pid: 100,
  notifies: [
    { t0: ns(1000), t1: ns(1060), length: 1026, index: 3, woke: 1 },
    { t0: ns(1500), t1: ns(1501), length: 1026, index: 1, woke: 0 },
    { t0: ns(2000), t1: ns(2005), length: 4, index: 1, woke: 1 },
    { t0: ns(5200), t1: ns(5212), length: 2, index: 0, woke: 1 },
  ],
  stops: [{ t0: ns(900), marks: [0.2, 0.3, 0.31, 0.4, 0.5] }],
  rows: [{ id: 'R1', ratio: 1.2, fullstop: 1.2, baseline: 1, unit: 'ms' }],
};

describe('scripts/sched-trace.mjs', () => {
  it('reads switches and wakes, with their times in µs', () => {
    const events = readTrace(`${trace}\n     perf  9 [000] 0.000001: sched:sched_stat_runtime: comm=perf pid=9 runtime=1 [ns]`);
    expect(events).toHaveLength(12);
    expect(events[1]).toEqual({ tid: 100, cpu: 1, t: 1001, kind: 'sched_waking', wakee: 200 });
    expect(events[2]).toEqual({ tid: 100, cpu: 1, t: 1002, kind: 'sched_switch', prev: 100, state: 'R', next: 200 });
  });

  it('says where each wakee ran, what main lost inside the call, and main\'s share of each phase', () => {
    const report = analyse(log, readTrace(trace));
    /** A kind's two lines: the call's figures, then what was runnable on main's CPU at the wake. */
    const kind = (name: string) => {
      const lines = report.split('\n');
      const at = lines.findIndex((l) => l.trimStart().startsWith(`${name}:`));
      return at < 0 ? [] : [lines[at]!.trim(), lines[at + 1]!.trim()];
    };
    expect(report).toContain('R1 1.200×');
    expect(kind("fullstop: the stopped task's slot")).toEqual([
      "fullstop: the stopped task's slot: 1 calls; the wakee ran on main's CPU in 1; main off its CPU inside the call 53 (p25–p75 53–53); wakes a call 1",
      "another thread runnable on main's CPU at the wake: 0 (the wakee on main's CPU in 0); none: 1 (on main's CPU in 1)"]);
    expect(kind('floor: GO to the plain worker')).toEqual([
      "floor: GO to the plain worker: 1 calls; the wakee ran on main's CPU in 0; main off its CPU inside the call 0 (p25–p75 0–0); wakes a call 1",
      "another thread runnable on main's CPU at the wake: 1 (the wakee on main's CPU in 0); none: 0 (on main's CPU in 0)"]);
    // A thread that went to sleep on main's CPU is not runnable there.
    expect(kind('piscina: a task posted')).toEqual([
      "piscina: a task posted: 1 calls; the wakee ran on main's CPU in 1; main off its CPU inside the call 7 (p25–p75 7–7); wakes a call 1",
      "another thread runnable on main's CPU at the wake: 0 (the wakee on main's CPU in 0); none: 1 (on main's CPU in 1)"]);
    // The signal phase, 900–1100 µs: on its CPU until the preemption at 1002, off 53 µs, then on again.
    expect(report).toMatch(/signal +length 200 .*on its CPU 147 .*preempted 53 .*asleep 0 /);
    expect(report).not.toContain('NaN');
  });

  it('refuses arguments it does not know, before tracing anything', async () => {
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(process.execPath, [script, '--keep'], (error, _stdout, stderr) => resolve({ code: (error?.code as number) ?? 0, stderr }));
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('usage: node scripts/sched-trace.mjs [--keep DIR]');
  });
});
