/**
 * What a stop answers when the server runs alone: the fleet's `StopAnswer` shapes, so a client
 * reads one kind of answer whether or not there is a fleet, plus `refused` when a stop could not
 * be kept.
 */
import type { StopReport, TurnRunner } from '../../src/index.js';

/** A stop's answer when there is no fleet. */
export type LocalStopAnswer =
  | { outcome: 'stopped'; sessionId: string; turnId: string; node: string; report: StopReport }
  | { outcome: 'pending'; sessionId: string; turnId: string; expiresAt: number }
  | { outcome: 'already_finished'; sessionId: string; turnId: string }
  | { outcome: 'refused'; sessionId: string; turnId: string; why: string; error: string }
  | { outcome: 'not_found'; sessionId: string };

/**
 * Stops the session's turn (or `turnId`) through `runner.requestStop` and answers in the fleet's
 * `StopAnswer` shapes: `stopped` with the report; `pending` for a turn id that has not started
 * (kept until `expiresAt`: its run will start cancelled); `refused` when such a stop could not be
 * kept (`why`: the session's or the runner's book is full), so the client knows its Stop is not in
 * force; `already_finished` for a turn that is over; `not_found` when nothing runs to stop.
 */
export async function stopAnswer(runner: TurnRunner, sessionId: string, options: { reason?: string; turnId?: string }, nodeId: string): Promise<LocalStopAnswer> {
  const answer = runner.requestStop(sessionId, options);
  switch (answer.outcome) {
    case 'stopping': return { outcome: 'stopped', sessionId, turnId: answer.turnId, node: nodeId, report: await answer.report };
    case 'pending': return { outcome: 'pending', sessionId, turnId: answer.turnId, expiresAt: answer.expiresAt };
    case 'already_finished': return { outcome: 'already_finished', sessionId, turnId: answer.turnId };
    case 'refused': return {
      outcome: 'refused', sessionId, turnId: answer.turnId, why: answer.why,
      error: `stop: not kept (${answer.why}): the turn has not started and no more stops can wait for turns now; the turn is not stopped`,
    };
    default: return { outcome: 'not_found', sessionId };
  }
}
