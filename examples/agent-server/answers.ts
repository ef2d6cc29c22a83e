/**
 * What an answer to a question does and answers. Alone: `runner.answer`. With a fleet:
 * `fleet.answer`, so a question asked on any instance is answered through any other, the first
 * answer recorded winning fleet-wide.
 */
import type { AnswerReply, TurnRunner } from '../../src/index.js';
import type { Fleet } from '../../src/fleet/index.js';
import { errorText } from './http.js';

/** The HTTP answer to an answer: `{ accepted, outcome, questionId, node? }`. */
export interface AnswerHttpReply {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Gives `answer` to the question: `accepted` (`node`: the instance whose runner took it),
 * `already_answered`, `not_found` (no open question: withdrawn or its turn ended), the same words
 * alone (`runner.answer`) and with a fleet (`fleet.answer`); 503 `relay_unavailable` while Redis
 * is away (a question asked on this instance is then still answered here).
 */
export async function answerQuestion(runner: TurnRunner, fleet: Fleet | undefined, questionId: string, answer: string): Promise<AnswerHttpReply> {
  let reply: AnswerReply = fleet === undefined ? runner.answer(questionId, answer) : await fleet.answer(questionId, answer);
  if (reply.outcome === 'relay_unavailable') {
    const local = runner.answer(questionId, answer);
    if (local.outcome !== 'accepted') return { status: 503, body: { accepted: false, ...reply, error: errorText(reply.error) } };
    reply = { ...local, relay: errorText(reply.error) } as AnswerReply;
  }
  return { status: 200, body: { accepted: reply.outcome === 'accepted', ...reply } };
}
