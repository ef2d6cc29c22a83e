/**
 * `AnswerReply`: what an answer to a question did, the one reply of `runner.answer` and
 * `fleet.answer` (DESIGN §11.3), and the name of the node a runner's answers say took them.
 */
import { LOCAL_NODE_ID } from '../constants.js';
import type { PendingQuestion } from './active-turn.js';

/**
 * What became of an answer, discriminated by `outcome`:
 * - `accepted`: the question's turn took it (its `turn.ask` resolved with it); `node` is the
 *   instance whose runner took it: its fleet's `nodeId`, or `'local'` for a runner no fleet uses;
 * - `already_answered`: an answer was taken first (claim-once; through a fleet, fleet-wide) while the
 *   question's turn runs;
 * - `not_found`: no open question has this id: never asked, withdrawn (its body stopped waiting),
 *   its turn stopping, stopped or over, or (through a fleet) not registered yet;
 * - `relay_unavailable` (`fleet.answer` only): Redis could not be reached, or the owner did not
 *   take the answer within `timeoutMs`; nothing was given (the question is open again), except when
 *   `error` says the owner took it but its confirmation did not come, or (Redis gone mid-claim and
 *   not back within `timeoutMs`) that the answer may have been claimed, and is then given by its owner.
 *
 * @example
 * const reply = runner.answer(questionId, 'yes');            // or: await fleet.answer(questionId, 'yes')
 * res.status(reply.outcome === 'accepted' ? 200 : 404).json(reply);
 */
export type AnswerReply =
  | { outcome: 'accepted'; questionId: string; node: string }
  | { outcome: 'already_answered'; questionId: string }
  | { outcome: 'not_found'; questionId: string }
  | { outcome: 'relay_unavailable'; questionId: string; error: Error };

/** The node name a fleet gave its runner (`nameNode`); module-private, read through `nodeOf`. */
const nodes = new WeakMap<object, string>();

/**
 * Name the node `runner` runs on (a fleet does, as it starts), or forget the name (`undefined`,
 * as it closes, unless another fleet named it since).
 */
export function nameNode(runner: object, nodeId: string | undefined, previous?: string): void {
  if (nodeId !== undefined) nodes.set(runner, nodeId);
  else if (previous === undefined || nodes.get(runner) === previous) nodes.delete(runner);
}

/** The node `runner`'s accepted answers name: its fleet's `nodeId`, else `LOCAL_NODE_ID` ('local'). */
export function nodeOf(runner: object): string {
  return nodes.get(runner) ?? LOCAL_NODE_ID;
}

/**
 * A runner's open questions, and those answered while their turn runs, so an answer says what
 * became of it as `fleet.answer` does: a second answer is `already_answered` (as the fleet's claim
 * is), not `not_found`. A turn's answered questions are forgotten as it ends (`endTurn`), so this
 * holds no more than the running turns' questions.
 */
export class Questions {
  readonly #open = new Map<string, PendingQuestion>();
  /** The questions answered whose turn still runs. */
  readonly #answered = new Set<string>();
  /** turnId → its answered questions. */
  readonly #ofTurn = new Map<string, string[]>();

  add(questionId: string, question: PendingQuestion): void { this.#open.set(questionId, question); }
  remove(questionId: string): void { this.#open.delete(questionId); }
  /** Whether the question waits for its answer. */
  isOpen(questionId: string): boolean { return this.#open.has(questionId); }

  /** Give `answer` to the question (`node`: the runner's, for `accepted`). */
  answer(questionId: string, answer: unknown, node: string): AnswerReply {
    const pending = this.#open.get(questionId);
    if (pending === undefined) {
      return this.#answered.has(questionId) ? { outcome: 'already_answered', questionId } : { outcome: 'not_found', questionId };
    }
    if (!pending.resolve(answer)) return { outcome: 'not_found', questionId }; // its turn is stopping
    this.#answered.add(questionId);
    const ids = this.#ofTurn.get(pending.turnId);
    if (ids === undefined) this.#ofTurn.set(pending.turnId, [questionId]);
    else ids.push(questionId);
    return { outcome: 'accepted', questionId, node };
  }

  /** The turn ended: its answered questions are now `not_found`, as the fleet's are. */
  endTurn(turnId: string): void {
    const ids = this.#ofTurn.get(turnId);
    if (ids === undefined) return;
    for (const questionId of ids) this.#answered.delete(questionId);
    this.#ofTurn.delete(turnId);
  }
}
