/**
 * Exec mode: the user's shell command through `exec` (its own process group, SIGTERM, the grace,
 * SIGKILL and a sweep). One uncancelled run measures the run time; each probe run is then
 * cancelled at a moment drawn uniformly over it. For each: cancel → tree gone (the call settled:
 * the group is empty and the output drained), whether SIGKILL was needed, and every process of the
 * tree that is still alive afterwards (a `TreeWatch`).
 */

import { StopReasons } from '../constants.js';
import { ToolError } from '../errors.js';
import { exec } from '../exec/exec.js';
import type { ExecResult } from '../exec/result.js';
import { TurnRegistry } from '../token/registry.js';
import type { CancelToken } from '../token/token.js';
import { sharedNow } from '../../workers/probe-record.js';
import { drawMoment, reach } from './moments.js';
import type { Progress } from './progress.js';
import { Interrupted, type Run } from './runs.js';
import { isAlive, TreeWatch, type Survivor } from './tree-watch.js';
import { UsageError, type ExecProbeOptions } from './usage.js';

/** What an exec-mode probe measured. */
export interface ExecProbe {
  baselineMs: number | undefined;
  /** Exit code of the uncancelled run; `undefined` with `--span`. */
  baselineExit: number | null | undefined;
  spanMs: number;
  runs: Run[];
  /**
   * Runs that ended before their cancel moment, or whose tree was already gone at it (drawn again,
   * at most `max(20, 5 × runs)` times; not in `runs`).
   */
  unmeasured: number;
  /** Processes of a stopped tree still alive after its stop (the probe kills them afterwards). */
  survivors: Survivor[];
}

/** The shell: the command is what the user would type, pipes and all. */
const SHELL = '/bin/sh';

/** Probe `o`'s command. Rejects with `UsageError` for a command that cannot start, `Interrupted` on `interrupt`. */
export async function probeExec(o: ExecProbeOptions, progress: Progress, interrupt: AbortSignal): Promise<ExecProbe> {
  const registry = new TurnRegistry();
  const live = new Set<CancelToken>();
  // A stop like any other: SIGTERM, the grace, SIGKILL; the run then settles and the loop ends.
  const onInterrupt = () => { for (const token of live) token.cancel(StopReasons.user); };
  interrupt.addEventListener('abort', onInterrupt, { once: true });
  let seq = 0;
  const survivors = new Map<number, Survivor>();

  const runOnce = async (cancelAfter: number | undefined) => {
    const sessionId = `probe-${++seq}`;
    const token = registry.beginTurn(sessionId);
    live.add(token);
    const watch = new TreeWatch();
    try {
      const start = sharedNow();
      const result = exec(SHELL, ['-c', o.command], { token, graceMs: o.graceMs });
      let r: ExecResult;
      let latencyMs: number | undefined;
      if (cancelAfter !== undefined && await reach(start + cancelAfter, result)) {
        // Nothing alive at the moment: the tree has ended and `exec` is only settling (reaping,
        // draining). A cancel now stops nothing, so no stop is measured.
        const alive = watch.walk() > 0;
        const t0 = performance.now();
        token.cancel(StopReasons.user);
        r = await result;
        if (alive) latencyMs = performance.now() - t0;
      } else {
        r = await result;
      }
      for (const s of await watch.finish(r.pid)) survivors.set(s.pid, s);
      return { r, latencyMs };
    } catch (e) {
      // A spawn that failed: the command cannot be probed.
      if (e instanceof ToolError) throw new UsageError(`cannot run ${JSON.stringify(o.command)}: ${e.message.split('\n')[0]}`);
      throw e;
    } finally {
      watch.stop();
      live.delete(token);
      registry.endTurn(sessionId, token);
    }
  };

  try {
    let spanMs = o.spanMs;
    let baselineMs: number | undefined;
    let baselineExit: number | null | undefined;
    if (spanMs === undefined) {
      progress.phase('one uncancelled run');
      const { r } = await runOnce(undefined);
      if (interrupt.aborted) throw new Interrupted();
      // 126/127: the shell found nothing it could run (not executable / not found).
      if (r.exitCode === 126 || r.exitCode === 127) {
        throw new UsageError(`cannot start ${JSON.stringify(o.command)}: ${r.stderr.trim().split('\n')[0] || `exit code ${r.exitCode}`}`);
      }
      baselineMs = spanMs = r.wallMs;
      baselineExit = r.exitCode;
    }
    progress.phase('cancelled runs');
    const runs: Run[] = [];
    let unmeasured = 0;
    const maxUnmeasured = Math.max(20, 5 * o.runs);
    while (runs.length < o.runs) {
      const { r, latencyMs } = await runOnce(drawMoment(spanMs));
      if (interrupt.aborted) throw new Interrupted();
      if (latencyMs === undefined || !r.cancelled) {
        // As in task mode: a shorter run than the first shrinks the span, so redraws end.
        spanMs = Math.min(spanMs, r.wallMs);
        if (++unmeasured >= maxUnmeasured) break;
        continue;
      }
      runs.push({ latencyMs, hard: r.forced });
      progress.tick(runs.length);
    }
    return { baselineMs, baselineExit, spanMs, runs, unmeasured, survivors: [...survivors.values()] };
  } finally {
    interrupt.removeEventListener('abort', onInterrupt);
    killSurvivors(survivors);
  }
}

/** Survivors are reported, then killed: the probe leaves nothing running, whatever the command did. */
function killSurvivors(survivors: Map<number, Survivor>): void {
  for (const { pid, start } of survivors.values()) {
    if (!isAlive(pid, start)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch { /* already gone */ }
  }
}
