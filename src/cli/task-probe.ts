/**
 * Task mode: the user's task function in a `TurnPool`, through the probe worker
 * (workers/probe-task.ts), which records every check of the token. One uncancelled run measures
 * the run time (and must succeed); then each probe run is cancelled at a moment drawn uniformly
 * over it, and the probe notes how long the run took to settle and whether it needed the hard stop.
 */

import { fileURLToPath } from 'node:url';
import { StopReasons } from '../constants.js';
import { isCancelledError } from '../errors.js';
import { TurnPool } from '../pool/pool.js';
import { TurnRegistry } from '../token/registry.js';
import {
  C_STARTED, LOAD_FAILED, newRecord, NO_EXPORT, T_CHECKS, T_END, T_START, type ProbeJob, type ProbeRecord,
} from '../../workers/probe-record.js';
import { GapTally } from './gaps.js';
import { drawMoment, reach } from './moments.js';
import type { Progress } from './progress.js';
import { Interrupted, type Run } from './runs.js';
import { UsageError, type TaskProbeOptions } from './usage.js';

const PROBE_WORKER = fileURLToPath(new URL('../../workers/probe-task.js', import.meta.url));

/** What a task-mode probe measured. */
export interface TaskProbe {
  /** The uncancelled run's time in the worker; `undefined` with `--span`. */
  baselineMs: number | undefined;
  /** Cancel moments were drawn over [0, spanMs). */
  spanMs: number;
  runs: Run[];
  /**
   * Runs in which no stop was measured (not in `runs`): they ended before their cancel moment, or
   * finished their work after it without checking the token. Each was drawn again; past
   * `max(20, 5 × runs)` of them the probe ends with the runs it has.
   */
  unmeasured: number;
  gaps: GapTally;
}

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Probe `o`'s task. Rejects with `UsageError` for a module, export or task that cannot run, `Interrupted` on `interrupt`. */
export async function probeTask(o: TaskProbeOptions, progress: Progress, interrupt: AbortSignal): Promise<TaskProbe> {
  const pool = new TurnPool({ filename: PROBE_WORKER, name: 'probeTask', minThreads: o.threads, maxThreads: o.threads, graceMs: o.graceMs });
  const registry = new TurnRegistry();
  const onInterrupt = () => void pool.destroy();
  interrupt.addEventListener('abort', onInterrupt, { once: true });
  let seq = 0;
  const gaps = new GapTally();

  /** One run; `cancelAfter` (ms after the task's start) cancels it, or `undefined` for none. */
  const runOnce = async (cancelAfter: number | undefined) => {
    const sessionId = `probe-${++seq}`;
    const token = registry.beginTurn(sessionId);
    const record = newRecord();
    const job: ProbeJob = { filename: o.filename, name: o.name, task: o.task, record };
    try {
      const settled: Promise<Settled> = pool.run(job, { token }).then((value) => ({ ok: true, value }), (error) => ({ ok: false, error }));
      if (cancelAfter === undefined || !(await started(record, settled))) return { record, settled: await settled };
      const at = new Float64Array(record.times)[T_START]! + cancelAfter;
      if (!(await reach(at, settled))) return { record, settled: await settled };
      // From here the user's checks are counted before and after the cancel.
      const checksBefore = checksOf(record);
      const t0 = performance.now();
      token.cancel(StopReasons.user);
      const result = await settled;
      const latencyMs = performance.now() - t0;
      // It returned without one more look at its token: it was not stopped, it finished.
      const finished = (result.ok || !isCancelledError(result.error)) && checksOf(record) === checksBefore;
      return { record, settled: result, latencyMs, cancelledAt: at, finished };
    } finally {
      registry.endTurn(sessionId, token);
    }
  };

  try {
    let spanMs = o.spanMs;
    let baselineMs: number | undefined;
    if (spanMs === undefined) {
      progress.phase('one uncancelled run');
      const base = await runOnce(undefined);
      if (interrupt.aborted) throw new Interrupted();
      if (!base.settled.ok) throw taskFailure(o, base.settled.error);
      const times = new Float64Array(base.record.times);
      baselineMs = spanMs = times[T_END]! - times[T_START]!;
      gaps.add(base.record);
    }
    progress.phase('cancelled runs');
    const runs: Run[] = [];
    let unmeasured = 0;
    const maxUnmeasured = Math.max(20, 5 * o.runs);
    // Each lane runs one task at a time, so `--threads` lanes keep that many workers busy.
    const lane = async () => {
      while (runs.length < o.runs) {
        if (interrupt.aborted) throw new Interrupted();
        const r = await runOnce(drawMoment(spanMs!));
        if (interrupt.aborted) throw new Interrupted();
        if (r.latencyMs === undefined || r.finished) {
          if (!r.settled.ok && !isCancelledError(r.settled.error) && r.latencyMs === undefined) throw taskFailure(o, r.settled.error);
          // No stop was measured: the run ended before its moment, or finished its work after
          // it without looking at the token. Draw again, a bounded number of times. A run time
          // shorter than the first run's would make the first case endless, so the span shrinks
          // to the run time just seen.
          gaps.add(r.record);
          const times = new Float64Array(r.record.times);
          if (r.latencyMs === undefined) spanMs = Math.min(spanMs!, times[T_END]! - times[T_START]!);
          if (++unmeasured >= maxUnmeasured) break;
          continue;
        }
        const hard = !r.settled.ok && (r.settled.error as { hard?: unknown }).hard === true;
        // A hard-stopped run was still inside a gap when the hard stop fired, grace after the cancel.
        gaps.add(r.record, hard ? r.cancelledAt! + o.graceMs : undefined);
        if (runs.length < o.runs) runs.push({ latencyMs: r.latencyMs, hard });
        progress.tick(runs.length);
      }
    };
    await Promise.all(Array.from({ length: o.threads }, lane));
    return { baselineMs, spanMs: spanMs!, runs, unmeasured, gaps };
  } catch (e) {
    if (interrupt.aborted) throw new Interrupted();
    throw e;
  } finally {
    interrupt.removeEventListener('abort', onInterrupt);
    await pool.destroy();
  }
}

/** True once the task has been called; false if the run settled first (it failed to load). */
async function started(record: ProbeRecord, settled: Promise<Settled>): Promise<boolean> {
  const control = new Int32Array(record.control);
  const wait = Atomics.waitAsync(control, C_STARTED, 0);
  // A run that settles without starting must not leave the waiter behind.
  void settled.then(() => Atomics.notify(control, C_STARTED));
  if (wait.async) await wait.value;
  return Atomics.load(control, C_STARTED) === 1;
}

function checksOf(record: ProbeRecord): number {
  return new Float64Array(record.times)[T_CHECKS]!;
}

/** The one-line error for a task that could not run uncancelled. */
function taskFailure(o: TaskProbeOptions, error: unknown): UsageError {
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith(LOAD_FAILED)) return new UsageError(`cannot load ${o.module}: ${message.slice(LOAD_FAILED.length)}`);
  if (message.startsWith(NO_EXPORT)) return new UsageError(`${o.module} has no exported function ${JSON.stringify(o.name)}${o.name === 'default' ? ' (and is not itself a function); choose one with --name' : ''}`);
  const name = error instanceof Error ? error.name : 'error';
  return new UsageError(`the task threw when not cancelled: ${name}: ${message.split('\n')[0]}`);
}
