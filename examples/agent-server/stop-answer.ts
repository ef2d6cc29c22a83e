/**
 * What a stop answers when the server runs alone: the fleet's `StopAnswer` shapes, so a client
 * reads one kind of answer whether or not there is a fleet.
 */
import type { Ledger, StopReport } from '../../src/index.js';

/** A stop's answer when there is no fleet. */
export type LocalStopAnswer =
  | { outcome: 'stopped'; sessionId: string; turnId: string; node: string; report: StopReport }
  | { outcome: 'pending' | 'already_finished'; sessionId: string; turnId: string }
  | { outcome: 'not_found'; sessionId: string };

/**
 * The answer to a stop without a fleet, in the fleet's `StopAnswer` shapes: `stopped`; `pending`
 * for a turn id that has not started (its run will start cancelled); `already_finished` for a
 * turn id the ledger has; `not_found` for a session with no running turn.
 */
export function stopAnswer(sessionId: string, turnId: string | undefined, report: StopReport | null, nodeId: string, ledger: Ledger): LocalStopAnswer {
  if (report !== null) return { outcome: 'stopped', sessionId, turnId: report.turnId, node: nodeId, report };
  if (turnId === undefined) return { outcome: 'not_found', sessionId };
  return ledger.hasTurn(turnId) ? { outcome: 'already_finished', sessionId, turnId } : { outcome: 'pending', sessionId, turnId };
}
