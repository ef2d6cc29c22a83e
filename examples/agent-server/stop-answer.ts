/**
 * What a stop answers when the server runs alone: the fleet's `StopAnswer` shapes, so a client
 * reads one kind of answer whether or not there is a fleet, plus `refused` when a stop could not
 * be kept.
 */
import type { LedgerStore, StopReport, TurnRunner } from '../../src/index.js';

/** A stop's answer when there is no fleet. */
export type LocalStopAnswer =
  | { outcome: 'stopped'; sessionId: string; turnId: string; node: string; report: StopReport }
  | { outcome: 'pending' | 'already_finished'; sessionId: string; turnId: string }
  | { outcome: 'refused'; sessionId: string; turnId: string; error: string }
  | { outcome: 'not_found'; sessionId: string };

/**
 * Stops the session's turn (or `turnId`) on `runner` and answers in the fleet's `StopAnswer`
 * shapes: `stopped`; `pending` for a turn id that has not started (its run will start cancelled);
 * `refused` when such a stop could not be kept (the runner's book for the session is full);
 * `already_finished` for a turn id the ledger has; `not_found` for a session with no running turn.
 */
export async function stopAnswer(
  runner: TurnRunner, ledger: LedgerStore, sessionId: string, options: { reason?: string; turnId?: string }, nodeId: string,
): Promise<LocalStopAnswer> {
  const { turnId } = options;
  const report = await runner.stop(sessionId, options);
  if (report !== null) return { outcome: 'stopped', sessionId, turnId: report.turnId, node: nodeId, report };
  if (turnId === undefined) return { outcome: 'not_found', sessionId };
  return ledger.hasTurn(turnId) ? { outcome: 'already_finished', sessionId, turnId } : { outcome: 'pending', sessionId, turnId };
}
