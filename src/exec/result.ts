/**
 * `ExecResult` and the one recorded outcome it is derived from (execa's lesson: the first cause
 * wins, `cause ??= ...`, and every public flag is read off it, so no two flags can disagree).
 */

import type { Containment } from './tree.js';

/**
 * What a child did. Resolved for every exit, zero or not, and for every stop.
 *
 * @example
 * const r = await exec('pytest', [], { token });
 * if (r.cancelled) return `stopped after ${r.wallMs} ms; output so far:\n${r.stdout}`;
 * return r.exitCode === 0 ? r.stdout : `failed (${r.exitCode}):\n${r.stderr}`;
 */
export interface ExecResult {
  /** Exit code of the child; `null` when a signal ended it. A non-zero code resolves, it is not thrown. */
  exitCode: number | null;
  /** Name of the signal that ended the child (`'SIGTERM'`, `'SIGKILL'`), or `null`. */
  signal: string | null;
  /**
   * What the tree wrote to stdout, as written (no trailing newline stripped), up to the stop. Past
   * `maxBuffer` bytes: its first half, a line `… N bytes omitted …` and its last half (see
   * `ExecOptions.maxBuffer`).
   */
  stdout: string;
  /** What the tree wrote to stderr, as written, up to the stop; past `maxBuffer`, as `stdout`. */
  stderr: string;
  /**
   * Bytes of each stream left out of `stdout`/`stderr` (the N of their omitted-bytes line); 0 when
   * the stream fit in `maxBuffer`.
   */
  omittedBytes: { stdout: number; stderr: number };
  /** Milliseconds from the spawn until the tree was gone and the output drained. */
  wallMs: number;
  /** Stopped by a cancel: the token, `signal`, the token's retirement, or `BackgroundProcess.kill()`. */
  cancelled: boolean;
  /** Stopped because `timeoutMs` passed. Never true together with `cancelled`: the first cause wins. */
  timedOut: boolean;
  /** SIGKILL was needed: something of the tree was still alive when the grace window ended. */
  forced: boolean;
  /**
   * The child exited, but its stdout or stderr was still open 200 ms later (a background process
   * it started holds them, `sleep 30 &`): the call settled with the output that had arrived, and
   * stopped reading. That process is not stopped for it: it stays in the call's tree, which the
   * turn's end or stop (or `signal`, `timeoutMs`, the host's exit) still ends. False otherwise.
   */
  pipesHeldOpen: boolean;
  /** Pid of the child, which is also its process group id. */
  pid: number;
  /**
   * How the child's tree was contained: `'cgroup'` (a cgroup v2 of its own: a stop reaches every
   * descendant, daemons included), `'process-group'` (its group plus the descendants found by
   * walking /proc) or `'tree-kill'` (no /proc: its group, and at the hard stop the tree tree-kill
   * finds). See `execContainment()` and docs/exec.md.
   */
  containment: Containment;
}

/**
 * Why a stop began. `leftover`: the child exited and its output closed, but processes it started
 * were still running; a foreground child may not outlive its call (docs/design.md §1, invariant 5).
 */
export type StopCause = 'cancel' | 'timeout' | 'leftover';

/** The recorded outcome of one child. */
export interface Outcome {
  /** `undefined`: no stop began (the child ended by itself). Set once: the first cause wins. */
  cause: StopCause | undefined;
  /** Set by the hard stop when it found something alive. */
  forced: boolean;
  /** Set when the call settled with its pipes still held open after the child's exit. */
  pipesHeldOpen: boolean;
}

export interface Facts {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly omittedBytes: { stdout: number; stderr: number };
  readonly wallMs: number;
  readonly pid: number;
  readonly containment: Containment;
}

export function toResult(outcome: Outcome, facts: Facts): ExecResult {
  return {
    ...facts,
    cancelled: outcome.cause === 'cancel',
    timedOut: outcome.cause === 'timeout',
    forced: outcome.forced,
    pipesHeldOpen: outcome.pipesHeldOpen,
  };
}
