/**
 * What an answer to a question does and answers. Alone: `runner.answer`. With a fleet:
 * `fleet.answer`, so a question asked on any instance is answered through any other, the first
 * answer recorded winning fleet-wide.
 */
import type { TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import { errorText } from './runner-events.js';

/** The HTTP answer to an answer: `{ accepted, outcome, questionId, node? }`. */
export interface AnswerReply {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Gives `answer` to the question: `accepted` (with a fleet, `node` is the asking instance),
 * `not_found` (no open question: answered, withdrawn or its turn ended), with a fleet also
 * `already_answered`, and 503 `relay_unavailable` while Redis is away (a question asked on this
 * instance is then still answered here).
 */
export async function answerQuestion(runner: TurnRunner, fleet: Fleet | undefined, nodeId: string, questionId: string, answer: string): Promise<AnswerReply> {
  if (fleet === undefined) {
    const accepted = runner.answer(questionId, answer);
    return { status: 200, body: { accepted, outcome: accepted ? 'accepted' : 'not_found', questionId } };
  }
  const reply = await fleet.answer(questionId, answer);
  if (reply.outcome === 'relay_unavailable') {
    if (runner.answer(questionId, answer)) return { status: 200, body: { accepted: true, outcome: 'accepted', questionId, node: nodeId, relay: errorText(reply.error) } };
    return { status: 503, body: { accepted: false, ...reply, error: errorText(reply.error) } };
  }
  return { status: 200, body: { accepted: reply.outcome === 'accepted', ...reply } };
}
