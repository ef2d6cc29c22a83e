/**
 * What a turn ends with: the `TurnOutcome` of `TurnRunner.run` and the `StopReport` of a stop.
 */

import type { CancelledError } from '../errors.js';

/** Timings in ms from the stop request, in the order of the stop sequence (docs/design.md §2). */
export interface StopReport {
  sessionId: string;
  turnId: string;
  /** The reason code given to `stop` (default `'cancel.user'`). */
  reason: string;
  /**
   * The text of the reason a caller's signal aborted with, when that abort made this stop (`run`'s
   * `signal`): Hono's "Client connection prematurely closed.", BullMQ's "user pressed stop", an
   * Error's message. At most `MAX_STOP_DETAIL_LENGTH` characters. Absent for any other stop. It is
   * never the reason: `reason` is `run`'s `signalReason`.
   */
  detail?: string;
  /** The grace window this stop gave the turn's owners. */
  graceMs: number;
  /**
   * True when every worker task, process tree and tool call settled within the grace window, the
   * body settled too (unless it was waiting on a question), and nothing of the turn was hard-stopped
   * by any timer. Questions never settle by themselves: the hard stop always rejects them.
   */
  settledCooperatively: boolean;
  /**
   * True when the body had not settled when the grace ended — or, if it was waiting on a question,
   * one turn of the event loop after the hard stop rejected that question: it ignored the stop, the
   * turn ended without it, and whatever it does later is dropped.
   */
  bodyAbandoned: boolean;
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
  /** Counts of what had to be hard-stopped, by this stop or by an owner's own timer during it. */
  hardStopped: { workers: number; processGroups: number; questions: number };
  /**
   * The first error of a ledger write or flush during the stop; `undefined` when the history was
   * written. The stop itself ran regardless: signal, grace, hard stop and the event.
   */
  ledgerError: unknown;
}

export type TurnOutcomeStatus = 'completed' | 'failed' | 'cancelled';

/**
 * How `TurnRunner.run` ended, discriminated by `status`.
 *
 * @example
 * const outcome = await runner.run(sessionId, body);
 * if (outcome.status === 'cancelled') log(outcome.report.reason);
 */
export type TurnOutcome<T> = CompletedOutcome<T> | FailedOutcome | CancelledOutcome;

/** The body returned `value`. */
export interface CompletedOutcome<T> {
  status: 'completed';
  turnId: string;
  value: T;
  /**
   * Present when the ledger failed to record the turn's `completed` status: the outcome stands,
   * the event fired, and the next `Ledger.open` closes the turn as `interrupted`.
   */
  ledgerError?: unknown;
}

/** The body threw `error` (or a tool threw a `FatalToolError`, which the body may have caught). */
export interface FailedOutcome {
  status: 'failed';
  turnId: string;
  error: unknown;
  /** As `CompletedOutcome.ledgerError`, for the `failed` status. */
  ledgerError?: unknown;
}

/** A stop ended the turn (a stop's ledger failure is `report.ledgerError`). */
export interface CancelledOutcome {
  status: 'cancelled';
  turnId: string;
  /** The stop as an error, for code that throws it on. */
  error: CancelledError;
  report: StopReport;
}
