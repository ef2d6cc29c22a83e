/**
 * What a turn ends with: the `TurnOutcome` of `TurnRunner.run` and the `StopReport` of a stop.
 */

/** Timings in ms from the stop request, in the order of the stop sequence (docs/design.md §2). */
export interface StopReport {
  sessionId: string;
  turnId: string;
  /** The reason code given to `stop` (default `'cancel.user'`). */
  reason: string;
  /** The grace window this stop gave the turn's owners. */
  graceMs: number;
  /** True when every worker task, process tree and tool call settled within the grace window (questions never do by themselves: they are always rejected by the hard stop). */
  settledCooperatively: boolean;
  /** Intent durable and token tripped (workers woken, `signal` aborted, groups sent SIGTERM). */
  signalledAt: number;
  /** The grace window ended: every owner settled, or `graceMs` ran out. */
  settledAt: number;
  /** What was left is stopped (workers terminated, groups killed, questions rejected). */
  hardStopAt: number;
  /** Aborted outputs and the `turn_aborted` marker appended. */
  markerAt: number;
  /** Ledger flushed (fdatasync). */
  flushedAt: number;
  /** `turn_aborted` emitted. */
  emittedAt: number;
  /** Counts of what the hard stop had to stop. */
  hardStopped: { workers: number; processGroups: number; questions: number };
}

export type TurnOutcomeStatus = 'completed' | 'failed' | 'cancelled';

export interface TurnOutcome<T> {
  status: TurnOutcomeStatus;
  turnId: string;
  /** The body's value (`completed`). */
  value?: T;
  /** What failed the turn (`failed`), or the `CancelledError` of a stop (`cancelled`). */
  error?: unknown;
  /** The stop's report (`cancelled`). */
  report?: StopReport;
}
