/**
 * The probe's result object: what `--json` writes, with exactly the names of docs/design.md §7,
 * and what the table, the verdict and the SVG are drawn from.
 */

import type { ExecProbe } from './exec-probe.js';
import { percentiles, round, type Percentiles } from './stats.js';
import type { TaskProbe } from './task-probe.js';
import type { ProbeOptions } from './usage.js';

export interface ProbeResult {
  mode: 'task' | 'exec';
  runs: number;
  graceMs: number;
  /** Runs that settled within the grace. */
  cooperative: number;
  /** Runs that needed the hard stop (the worker terminated / SIGKILL). */
  hard: number;
  /** Cancel → settled, over every run. */
  latencyMs: Percentiles;
  /** Task mode: the stretches between two checks of the token. */
  gapMs?: { median: number; max: number };
  /** Exec mode: pids of the command's trees still alive after their stop (must be empty). */
  survivors?: number[];
}

export function toResult(o: ProbeOptions, probe: TaskProbe | ExecProbe): ProbeResult {
  const hard = probe.runs.filter((r) => r.hard).length;
  const result: ProbeResult = {
    mode: o.mode,
    runs: probe.runs.length,
    graceMs: o.graceMs,
    cooperative: probe.runs.length - hard,
    hard,
    latencyMs: percentiles(probe.runs.map((r) => r.latencyMs)),
  };
  if ('gaps' in probe) result.gapMs = { median: round(probe.gaps.medianMs()), max: round(probe.gaps.maxMs) };
  else result.survivors = probe.survivors.map((s) => s.pid);
  return result;
}
