/**
 * The definite answer of `TurnRunner.requestStop`: what became of a stop, so a caller (a fleet, an
 * HTTP handler) can tell a stop under way from one kept for a turn that has not started, from one
 * that could not be kept, and from nothing to stop.
 */

import type { StopReport } from './report.js';
import type { StopRefusal } from './pending-stops.js';
import type { TerminalStatus } from '../ledger/entry.js';

export type { StopRefusal } from './pending-stops.js';

/**
 * What `runner.requestStop(sessionId, options)` did, discriminated by `outcome`. The words are
 * `fleet.stop`'s (`StopAnswer`) for the same situations (DESIGN §11.3), so a caller that moves
 * from one to the other learns nothing new; only `stopping` is the runner's own (its answer is
 * synchronous: the report is a promise, where the fleet waits for it and says `stopped`).
 * - `stopping`: the session's running turn (or the turn `turnId` names, running) is being stopped;
 *   `report` resolves with its `StopReport` once `turn_aborted` is emitted (a repeat joins the
 *   first stop: the same promise, its grace and reason).
 * - `pending`: `turnId` has not started and is not in the ledger; the stop is kept for it until
 *   `expiresAt` (epoch ms) and its `run` will start nothing of its body. `reason` and `graceMs` are
 *   the kept stop's (the first one's, for a repeat). The `stop_pending` event fired.
 * - `refused`: the stop could not be kept for `turnId` (`why`: `session_full`, the session holds
 *   `MAX_PENDING_STOPS_PER_SESSION`; `book_full`, the runner holds `MAX_PENDING_STOPS`; `disabled`,
 *   `pendingStopMs` is 0). Nothing was kept and no stop already kept was dropped. The `stop_refused`
 *   event fired.
 * - `already_finished`: the turn is over (`turnId` is in the ledger, or this runner ended it) or
 *   ending by itself (its body settled and it is writing its end): there is nothing left to stop.
 *   `status` is how it ended (or is ending), for the last `MAX_ENDED_TURNS_KEPT` turns this runner
 *   ended; absent for an older turn only its ledger knows (`ledger.entries({ turnId })` has it).
 * - `not_found`: nothing to stop: the session has no running turn and no `turnId` was given, or
 *   `turnId` is another session's running turn. Nothing was kept.
 *
 * @example
 * const answer = runner.requestStop(sessionId, { turnId });
 * if (answer.outcome === 'stopping') res.json(await answer.report);
 * else res.json({ outcome: answer.outcome });
 */
export type StopRequest =
  | { outcome: 'stopping'; sessionId: string; turnId: string; report: Promise<StopReport> }
  | { outcome: 'pending'; sessionId: string; turnId: string; reason: string; graceMs: number; expiresAt: number }
  | { outcome: 'refused'; sessionId: string; turnId: string; reason: string; why: StopRefusal }
  | { outcome: 'already_finished'; sessionId: string; turnId: string; status?: TerminalStatus }
  | { outcome: 'not_found'; sessionId: string; turnId?: string };

/** A `StopRequest` whose report is awaited: `stopping` is then `stopped` with its report, `fleet.stop`'s word. */
export type SettledStop =
  | Exclude<StopRequest, { outcome: 'stopping' }>
  | { outcome: 'stopped'; sessionId: string; turnId: string; report: StopReport };

/** `answer`, once its stop (if one is under way) has ended. */
export async function settledStop(answer: StopRequest): Promise<SettledStop> {
  if (answer.outcome !== 'stopping') return answer;
  return { outcome: 'stopped', sessionId: answer.sessionId, turnId: answer.turnId, report: await answer.report };
}
