/**
 * The requester's side of fleet answers (`fleet.answer`, a stop-only client's `answer`): the owner's
 * side is `Questions` (src/fleet/questions.ts). `claim_answer` claims the question (the first
 * answer fleet-wide wins) and publishes it to the owner; the reply is the owner's `answered`
 * message on this node's channel, or after `timeoutMs`, `release_answer` undoes a claim the owner
 * never took. The waiter is registered before the claim is sent, as a stop's is
 * (src/fleet/requests.ts says why).
 */
import { randomUUID } from 'node:crypto';
import { messageOf } from '../base/render.js';
import type { AnswerReply } from './answers.js';
import type { FleetRedisClient } from './client.js';
import { FleetUnavailableError } from './errors.js';
import type { FleetKeys } from './keys.js';
import type { AnsweredMessage } from './messages.js';
import { QUESTION_SCRIPTS } from './question-scripts.js';
import { runScript, type FleetScript } from './scripts.js';
import { toWire } from './wire-id.js';
import { waitAtMost, within } from '../base/within.js';

export interface AnswerRequestsContext {
  redis: FleetRedisClient; keys: FleetKeys;
  /** This node's name: the owner's `answered` comes to its channel. */
  nodeId: string;
  commandTimeoutMs: number;
  /** The caller's name in messages: `Fleet.answer` or `FleetClient.answer`. */
  where: string;
}

/** How often an answer whose claim lost its connection looks whether the client is ready again, in ms. */
const READY_POLL_MS = 20;

export class AnswerRequests {
  readonly #ctx: AnswerRequestsContext;
  /** Answers under way (`answer`), which `close` lets settle before it resolves. */
  readonly #answering = new Set<Promise<AnswerReply>>();
  /** True once `close` has begun: a waiting answer is undone rather than waited for. */
  #closing = false;
  /** Answers this node sent, waiting for the owner's `answered`, by claim. */
  readonly #waiting = new Map<string, (msg: AnsweredMessage | undefined) => void>();

  constructor(ctx: AnswerRequestsContext) {
    this.#ctx = ctx;
  }

  #script(questionId: string, s: FleetScript, args: string[], ms = this.#ctx.commandTimeoutMs): Promise<unknown> {
    return runScript(this.#ctx.redis, s, [this.#ctx.keys.question(questionId)], args, ms);
  }

  /** An answer, its arguments checked (`answerJson` within the bound); `close` waits for it (bounded). */
  answer(questionId: string, answerJson: string, timeoutMs: number): Promise<AnswerReply> {
    const answering = this.#answer(questionId, answerJson, timeoutMs);
    this.#answering.add(answering);
    answering.finally(() => this.#answering.delete(answering)).catch(() => { /* the caller has the rejection */ });
    return answering;
  }

  async #answer(questionId: string, answerJson: string, timeoutMs: number): Promise<AnswerReply> {
    const { redis, nodeId, keys, where } = this.#ctx;
    const unavailable = (message: string, cause?: unknown): AnswerReply =>
      ({ outcome: 'relay_unavailable', questionId, error: new FleetUnavailableError(`${where}: ${message}`, cause === undefined ? undefined : { cause }) });
    if (!redis.isReady) return unavailable('Redis is not reachable');
    const deadline = performance.now() + timeoutMs;
    const claim = randomUUID();
    let settle!: (msg: AnsweredMessage | undefined) => void;
    const answered = new Promise<AnsweredMessage | undefined>((resolve) => { settle = resolve; });
    this.#waiting.set(claim, settle);
    try {
      let reply: string[];
      try {
        reply = await this.#script(questionId, QUESTION_SCRIPTS.claim, [toWire(questionId), claim, nodeId, answerJson, keys.channelPrefix], Math.max(1, timeoutMs)) as string[];
      } catch (cause) {
        // The claim may have landed with its reply lost: undo it, or it would hold the question.
        const undone = await this.#release(questionId, claim, deadline);
        if (undone?.[0] === 'answered') return { outcome: 'accepted', questionId, node: undone[1]! };
        if (undone?.[0] === 'delivered') return unavailable(`Redis did not answer in time (${messageOf(cause)}); the owner took the answer but did not confirm`, cause);
        if (undone === undefined) {
          const when = this.#closing ? 'before the fleet closed' : `within ${timeoutMs} ms`;
          return unavailable(`Redis did not answer (${messageOf(cause)}) and could not be asked again ${when}; the answer may have been claimed, and then its owner gives it`, cause);
        }
        // released: the claim landed and is undone; gone: it never landed, or the question went without it.
        return unavailable(`Redis did not answer (${messageOf(cause)}); nothing was given`, cause);
      }
      if (reply[0] === 'not_found') return { outcome: 'not_found', questionId };
      if (reply[0] === 'already_answered') return { outcome: 'already_answered', questionId };
      const msg = await within(answered, Math.max(0, deadline - performance.now()), () => undefined);
      if (msg !== undefined) return msg.accepted ? { outcome: 'accepted', questionId, node: msg.node } : { outcome: 'not_found', questionId };
      // No word from the owner in time (or the fleet is closing): undo the claim unless the owner has taken it.
      const when = this.#closing ? 'before the fleet closed' : `within ${timeoutMs} ms`;
      let released: string[];
      try {
        released = await this.#script(questionId, QUESTION_SCRIPTS.release, [claim]) as string[];
      } catch (cause) {
        return unavailable(`the owner did not confirm ${when}, and Redis did not answer after (${messageOf(cause)})`, cause);
      }
      if (released[0] === 'answered') return { outcome: 'accepted', questionId, node: released[1]! };
      if (released[0] === 'gone') return { outcome: 'not_found', questionId };
      if (released[0] === 'delivered') return unavailable(`the owner ${reply[1]} took the answer but did not confirm ${when}`);
      return unavailable(`the owner ${reply[1]} did not take the answer ${when}; nothing was given (the question is open again)`);
    } finally {
      this.#waiting.delete(claim);
    }
  }

  /**
   * Undoes `claim` unless the owner has taken it (`release_answer`), once Redis can be asked: a
   * claim whose reply was lost with its connection may have landed, and the client reconnects by
   * itself meanwhile. Undefined when Redis could not be asked before `deadline` or the fleet's
   * close (or did not answer).
   */
  async #release(questionId: string, claim: string, deadline: number): Promise<string[] | undefined> {
    const { redis } = this.#ctx;
    while (!redis.isReady) {
      const left = deadline - performance.now();
      // Closing: no waiting for Redis (close resolves once the answers have settled).
      if (left <= 0 || this.#closing) return undefined;
      await new Promise((resolve) => setTimeout(resolve, Math.min(READY_POLL_MS, left)));
    }
    return this.#script(questionId, QUESTION_SCRIPTS.release, [claim]).catch(() => undefined) as Promise<string[] | undefined>;
  }

  /** An `answered` message: settle the answer that claimed it. */
  onAnswered(msg: AnsweredMessage): void {
    this.#waiting.get(msg.claim)?.(msg);
  }

  /** Answers under way (for leak checks). */
  get size(): number { return this.#answering.size; }

  /**
   * Answers waiting for their owner's confirmation stop waiting: each is undone unless the owner
   * has taken it, and has settled when this resolves (within `commandTimeoutMs`), so no script of
   * theirs reaches the caller's client after.
   */
  async close(): Promise<void> {
    this.#closing = true;
    for (const settle of this.#waiting.values()) settle(undefined);
    await waitAtMost(Promise.allSettled([...this.#answering]), this.#ctx.commandTimeoutMs);
  }
}
