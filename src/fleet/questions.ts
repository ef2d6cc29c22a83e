/**
 * Fleet answers: a question asked in a fleet turn is answerable through any instance.
 *
 * Owner side: the runner's `question` event of a turn this node owns registers the question in
 * Redis (`open_question`); an `answer` message (or, for a lost publish or a lost take reply, the
 * poll every `renewMs`, which also keeps the record alive) takes the claimed answer
 * (`take_answer`), gives it to `runner.answer` once and says what the runner did (`settle_answer`,
 * which tells the requester). The turn's end deletes its questions' records (`end_question`; one
 * whose answer its runner accepted stays `ended` for `leaseMs`, so a requester that missed the
 * confirmation still learns it).
 *
 * Requester side (`answer`): `claim_answer` claims the question (the first answer fleet-wide wins)
 * and publishes it to the owner; the reply is the owner's `answered` message, or after
 * `timeoutMs`, `release_answer` undoes a claim the owner never took. The waiter is registered
 * before the claim is sent, as a stop's is (src/fleet/requests.ts says why).
 */
import { randomUUID } from 'node:crypto';
import { messageOf } from '../base/render.js';
import type { TurnRunner } from '../turn/runner.js';
import type { TurnRunnerEvents } from '../turn/runner-events.js';
import type { AnswerReply } from './answers.js';
import type { FleetRedisClient } from './client.js';
import { FleetUnavailableError } from './errors.js';
import { leaseMember, type FleetKeys } from './keys.js';
import type { AnswerMessage, AnsweredMessage } from './messages.js';
import { QUESTION_SCRIPTS } from './question-scripts.js';
import { runScript, type FleetScript } from './scripts.js';
import { toWire } from './wire-id.js';

export interface QuestionsContext {
  redis: FleetRedisClient; runner: TurnRunner; keys: FleetKeys; nodeId: string; leaseMs: number; renewMs: number;
  commandTimeoutMs: number;
  /** The epoch of a turn this node owns and runs; undefined for any other turn. */
  ownedEpoch(sessionId: string, turnId: string): number | undefined;
}

type Question = TurnRunnerEvents['question'][0];

/** How often an answer whose claim lost its connection looks whether the client is ready again, in ms. */
const READY_POLL_MS = 20;

export class Questions {
  readonly #ctx: QuestionsContext;
  /** Questions registered by this node, by turn (`leaseMember`), so a turn's end drops them. */
  readonly #open = new Map<string, Set<string>>();
  /**
   * Answers this node's runner was given, by question: the claim and whether it took it. A take
   * repeated after its reply was lost (take_answer hands a delivered answer over again) only
   * settles it again: `runner.answer` is called once per claim.
   */
  readonly #given = new Map<string, { claim: string; accepted: boolean }>();
  /** Answers under way (`answer`), which `close` lets settle before it resolves. */
  readonly #answering = new Set<Promise<AnswerReply>>();
  /** True once `close` has begun: a waiting answer is undone rather than waited for. */
  #closing = false;
  /** Answers this node sent, waiting for the owner's `answered`, by claim. */
  readonly #waiting = new Map<string, (msg: AnsweredMessage | undefined) => void>();
  #poll: NodeJS.Timeout | undefined;
  readonly #onQuestion = ({ sessionId, turnId, questionId }: Question) => {
    const epoch = this.#ctx.ownedEpoch(sessionId, turnId);
    if (epoch === undefined) return;
    const key = leaseMember(sessionId, turnId);
    (this.#open.get(key) ?? this.#open.set(key, new Set()).get(key)!).add(questionId);
    const record = JSON.stringify({ sessionId: toWire(sessionId), turnId: toWire(turnId), epoch, node: this.#ctx.nodeId, state: 'open' });
    this.#script(questionId, QUESTION_SCRIPTS.open, [record, String(Math.ceil(this.#ctx.leaseMs))])
      .catch(() => { /* Redis away: answered here only (runner.answer) */ });
  };

  constructor(ctx: QuestionsContext) {
    this.#ctx = ctx;
    ctx.runner.on('question', this.#onQuestion);
    this.#poll = setInterval(() => this.#pollAll(), ctx.renewMs);
  }

  #script(questionId: string, s: FleetScript, args: string[], ms = this.#ctx.commandTimeoutMs): Promise<unknown> {
    return runScript(this.#ctx.redis, s, [this.#ctx.keys.question(questionId)], args, ms);
  }

  /** `Fleet.answer`, its arguments checked; `close` waits for it (bounded). */
  answer(questionId: string, answerJson: string, timeoutMs: number): Promise<AnswerReply> {
    const answering = this.#answer(questionId, answerJson, timeoutMs);
    this.#answering.add(answering);
    answering.finally(() => this.#answering.delete(answering)).catch(() => { /* the caller has the rejection */ });
    return answering;
  }

  async #answer(questionId: string, answerJson: string, timeoutMs: number): Promise<AnswerReply> {
    const { redis, nodeId, keys } = this.#ctx;
    const unavailable = (message: string, cause?: unknown): AnswerReply =>
      ({ outcome: 'relay_unavailable', questionId, error: new FleetUnavailableError(message, cause === undefined ? undefined : { cause }) });
    if (!redis.isReady) return unavailable('Fleet.answer: Redis is not reachable');
    const deadline = performance.now() + timeoutMs;
    const claim = randomUUID();
    let settle!: (msg: AnsweredMessage | undefined) => void;
    const answered = new Promise<AnsweredMessage | undefined>((resolve) => { settle = resolve; });
    this.#waiting.set(claim, settle);
    let timer: NodeJS.Timeout | undefined;
    try {
      let reply: string[];
      try {
        reply = await this.#script(questionId, QUESTION_SCRIPTS.claim, [toWire(questionId), claim, nodeId, answerJson, keys.channelPrefix], Math.max(1, timeoutMs)) as string[];
      } catch (cause) {
        // The claim may have landed with its reply lost: undo it, or it would hold the question.
        const undone = await this.#release(questionId, claim, deadline);
        if (undone?.[0] === 'answered') return { outcome: 'accepted', questionId, node: undone[1]! };
        if (undone?.[0] === 'delivered') return unavailable(`Fleet.answer: Redis did not answer in time (${messageOf(cause)}); the owner took the answer but did not confirm`, cause);
        if (undone === undefined) {
          const when = this.#closing ? 'before the fleet closed' : `within ${timeoutMs} ms`;
          return unavailable(`Fleet.answer: Redis did not answer (${messageOf(cause)}) and could not be asked again ${when}; the answer may have been claimed, and then its owner gives it`, cause);
        }
        // released: the claim landed and is undone; gone: it never landed, or the question went without it.
        return unavailable(`Fleet.answer: Redis did not answer (${messageOf(cause)}); nothing was given`, cause);
      }
      if (reply[0] === 'not_found') return { outcome: 'not_found', questionId };
      if (reply[0] === 'already_answered') return { outcome: 'already_answered', questionId };
      timer = setTimeout(() => settle(undefined), Math.max(0, deadline - performance.now()));
      const msg = await answered;
      if (msg !== undefined) return msg.accepted ? { outcome: 'accepted', questionId, node: msg.node } : { outcome: 'not_found', questionId };
      // No word from the owner in time (or the fleet is closing): undo the claim unless the owner has taken it.
      const when = this.#closing ? 'before the fleet closed' : `within ${timeoutMs} ms`;
      let released: string[];
      try {
        released = await this.#script(questionId, QUESTION_SCRIPTS.release, [claim]) as string[];
      } catch (cause) {
        return unavailable(`Fleet.answer: the owner did not confirm ${when}, and Redis did not answer after (${messageOf(cause)})`, cause);
      }
      if (released[0] === 'answered') return { outcome: 'accepted', questionId, node: released[1]! };
      if (released[0] === 'gone') return { outcome: 'not_found', questionId };
      if (released[0] === 'delivered') return unavailable(`Fleet.answer: the owner ${reply[1]} took the answer but did not confirm ${when}`);
      return unavailable(`Fleet.answer: the owner ${reply[1]} did not take the answer ${when}; nothing was given (the question is open again)`);
    } finally {
      clearTimeout(timer);
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

  /** An `answer` message: take the claimed answer and give it to the runner. */
  onAnswer(msg: AnswerMessage): void {
    void this.#deliver(msg.questionId, msg.claim);
  }

  async #deliver(questionId: string, claim: string): Promise<void> {
    const { runner, nodeId, keys, renewMs } = this.#ctx;
    try {
      const took = await this.#script(questionId, QUESTION_SCRIPTS.take, [nodeId, claim, String(Math.ceil(this.#ctx.leaseMs))], renewMs) as string[];
      if (took[0] !== 'take') return;
      const accepted = this.#give(questionId, took[1]!, took[2]!);
      await this.#script(questionId, QUESTION_SCRIPTS.settle, [toWire(questionId), took[1]!, accepted ? '1' : '0', nodeId, keys.channelPrefix, took[3]!]);
    } catch {
      // Redis away: the claim stays taken; the requester's wait ends and says so.
    }
  }

  /** Gives the claimed answer to the runner, once per claim; whether it took it. */
  #give(questionId: string, claim: string, answerJson: string): boolean {
    const given = this.#given.get(questionId);
    if (given?.claim === claim) return given.accepted;
    let accepted = false;
    try { accepted = this.#ctx.runner.answer(questionId, JSON.parse(answerJson)).outcome === 'accepted'; } catch { /* an answer it cannot take is not accepted */ }
    // Kept only while the question's turn is open here: its end (endTurn) drops what is kept.
    if ([...this.#open.values()].some((ids) => ids.has(questionId))) this.#given.set(questionId, { claim, accepted });
    return accepted;
  }

  /** The fallback for a lost `answer` publish (or take reply), and what keeps the records alive: take any claimed answer. */
  #pollAll(): void {
    if (!this.#ctx.redis.isReady) return;
    for (const ids of this.#open.values()) for (const id of ids) void this.#deliver(id, '');
  }

  /** The turn ended: its questions' records go (an answer now finds `not_found`). */
  async endTurn(sessionId: string, turnId: string): Promise<void> {
    const key = leaseMember(sessionId, turnId);
    const ids = this.#open.get(key);
    if (ids === undefined) return;
    this.#open.delete(key);
    const accepted = new Map([...ids].map((id) => {
      const given = this.#given.get(id);
      this.#given.delete(id);
      return [id, given?.accepted === true ? given.claim : ''];
    }));
    // Redis away: nothing to wait for; the records expire `leaseMs` after the last poll.
    if (!this.#ctx.redis.isReady) return;
    // An accepted answer's record stays `ended` for leaseMs (its requester may not have heard); the rest go.
    await Promise.allSettled([...accepted].map(([id, claim]) => this.#script(id, QUESTION_SCRIPTS.end, [claim, String(Math.ceil(this.#ctx.leaseMs))])));
  }

  /** Open questions registered by this node (for leak checks). */
  get size(): number {
    let n = 0;
    for (const ids of this.#open.values()) n += ids.size;
    return n;
  }

  /** Live timers (the poll interval). */
  get timers(): number { return Number(this.#poll !== undefined); }

  /**
   * Stop polling and listening; the questions of turns still running here are removed from Redis
   * (answerable here only). Answers waiting for their owner's confirmation stop waiting: each is
   * undone unless the owner has taken it, and has settled when this resolves (within
   * `commandTimeoutMs`), so no script of theirs reaches the caller's client after.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#ctx.runner.off('question', this.#onQuestion);
    clearInterval(this.#poll);
    this.#poll = undefined;
    for (const settle of this.#waiting.values()) settle(undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.all([
      Promise.allSettled([...this.#open.keys()].map((key) => {
        const [sessionId, turnId] = JSON.parse(key) as [string, string];
        return this.endTurn(sessionId, turnId);
      })),
      Promise.race([
        Promise.allSettled([...this.#answering]),
        new Promise((resolve) => { timer = setTimeout(resolve, this.#ctx.commandTimeoutMs); }),
      ]).finally(() => clearTimeout(timer)),
    ]);
  }
}
