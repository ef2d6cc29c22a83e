/**
 * What the fleet answers: a session's turn as Redis has it (`FleetTurn`), a stop's answer
 * (`StopAnswer`) and a fleet turn's outcome (`FleetOutcome`); an answer's reply (`AnswerReply`) is the
 * runner's, re-exported.
 */
import type { StopReport, TurnOutcome } from '../turn/report.js';
import type { TerminalStatus } from '../ledger/entry.js';

export type { AnswerReply } from '../turn/answer-reply.js';

/** Statuses of a fleet turn record; the last four are terminal and never change. */
export type FleetTurnStatus = 'running' | 'cancelling' | 'completed' | 'failed' | 'cancelled' | 'interrupted';

/** A session's latest fleet turn, as its Redis record has it. */
export interface FleetTurn {
  /** The session the turn belongs to. */
  sessionId: string;
  /** The turn's id (the runner's `turnId`). */
  turnId: string;
  /** The session's turn counter at registration: fences every write about this turn. */
  epoch: number;
  /** The owner: the `nodeId` of the instance that runs (or ran) the turn. */
  node: string;
  /** As recorded in Redis; a turn past its lease reads `running` until a script or sweep looks at it. */
  status: FleetTurnStatus;
  /** A stop has been recorded for the turn. */
  stopRequested: boolean;
  /** The stop's reason once one is recorded; a terminal reason (`lease.expired`, `fleet.closed`, ...) replaces it. */
  reason?: string;
  /** The node whose stop was recorded first (absent until a stop is). */
  requester?: string;
  /** Lease deadline, Redis server time in ms since the epoch. */
  leaseUntil: number;
}

/**
 * The answer of `Fleet.stop`. The words are `runner.requestStop`'s (`StopRequest`) for the same
 * situations (DESIGN §11.3): `not_found`, `pending`, `refused` with `why`, `already_finished` with
 * `status`; `stopped`, `cancelling`, `interrupted` and `relay_unavailable` are the fleet's own.
 * - `stopped`: the owner stopped the turn and sent its `StopReport` (also a stop that joined one under way);
 * - `cancelling`: the stop is recorded in Redis but no acknowledgement came within `timeoutMs`
 *   (or `wait: false`); the owner will still act on it (publish, or its next lease renewal);
 * - `already_finished`: the addressed turn had ended; `status` is its terminal status;
 * - `pending`: no instance has registered `turnId` (or its record expired); the stop is kept
 *   `pendingStopMs` and that turn, run on any instance, starts cancelled. Nothing was published;
 * - `refused` (`why: 'session_full'`): `turnId` is not registered and the session already holds
 *   `maxPendingStops` pending stops (a flood of made-up turn ids): this stop was NOT kept, and
 *   that turn, if it starts, runs. Other sessions' pending stops are never affected;
 * - `not_found`: a stop without `turnId` for a session with no fleet turn;
 * - `interrupted`: the owner's lease ran out (it died or lost Redis); the turn is over;
 * - `relay_unavailable`: Redis could not be reached within `timeoutMs`; nothing was recorded
 *   as far as this instance knows.
 */
export type StopAnswer =
  | { outcome: 'stopped'; sessionId: string; turnId: string; epoch: number; node: string; report: StopReport }
  | { outcome: 'cancelling'; sessionId: string; turnId: string; epoch: number; node: string }
  | { outcome: 'already_finished'; sessionId: string; turnId: string; status: TerminalStatus }
  | { outcome: 'pending'; sessionId: string; turnId: string }
  | { outcome: 'refused'; sessionId: string; turnId: string; reason: string; why: 'session_full' }
  | { outcome: 'not_found'; sessionId: string; turnId?: string }
  | { outcome: 'interrupted'; sessionId: string; turnId: string; epoch: number; node: string }
  | { outcome: 'relay_unavailable'; sessionId: string; error: Error };

/** `TurnRunner.run`'s outcome, plus the fleet's facts about the turn. */
export type FleetOutcome<T> = TurnOutcome<T> & {
  /** Redis could not be reached and `onUnavailable: 'local'` ran the turn anyway, with no record. */
  unregistered?: true;
  /** The turn's epoch (absent when unregistered). */
  epoch?: number;
};
