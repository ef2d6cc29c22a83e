/**
 * Fleet answers: a question asked in a fleet turn is answerable through any instance.
 *
 * Owner side: a question of a turn this node owns is registered in Redis (`open_question`) before
 * the runner's `question` event tells anyone of it (a gate: src/turn/question-gates.ts); an
 * `answer` message (or, for a lost publish or a lost take reply, the poll every `renewMs`, which
 * also keeps the record alive) takes the claimed answer (`take_answer`), gives it to
 * `runner.answer` once and says what the runner did (`settle_answer`, which tells the requester). The turn's end deletes its questions' records (`end_question`; one
 * whose answer its runner accepted stays `ended` for `leaseMs`, so a requester that missed the
 * confirmation still learns it).
 *
 * The requester's side (`fleet.answer`) is `AnswerRequests` (src/fleet/answer-requests.ts).
 */
import type { TurnRunner } from '../turn/runner.js';
import type { TurnRunnerEvents } from '../turn/runner-events.js';
import type { FleetRedisClient } from './client.js';
import { leaseMember, type FleetKeys } from './keys.js';
import type { AnswerMessage } from './messages.js';
import { QUESTION_SCRIPTS } from './question-scripts.js';
import { runScript, type FleetScript } from './scripts.js';
import { toWire } from './wire-id.js';
import { gateQuestions } from '../turn/question-gates.js';

export interface QuestionsContext {
  redis: FleetRedisClient; runner: TurnRunner; keys: FleetKeys; nodeId: string; leaseMs: number; renewMs: number;
  commandTimeoutMs: number;
  /** The epoch of a turn this node owns and runs; undefined for any other turn. */
  ownedEpoch(sessionId: string, turnId: string): number | undefined;
}

type Question = TurnRunnerEvents['question'][0];

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
  #poll: NodeJS.Timeout | undefined;
  /** Registers the question in Redis before the runner tells anyone of it (question-gates.ts). */
  readonly #onQuestion = ({ sessionId, turnId, questionId }: Question): Promise<unknown> | undefined => {
    const epoch = this.#ctx.ownedEpoch(sessionId, turnId);
    if (epoch === undefined) return undefined;
    const key = leaseMember(sessionId, turnId);
    (this.#open.get(key) ?? this.#open.set(key, new Set()).get(key)!).add(questionId);
    const record = JSON.stringify({ sessionId: toWire(sessionId), turnId: toWire(turnId), epoch, node: this.#ctx.nodeId, state: 'open' });
    return this.#script(questionId, QUESTION_SCRIPTS.open, [record, String(Math.ceil(this.#ctx.leaseMs))])
      .catch(() => { /* Redis away: answered here only (runner.answer) */ });
  };
  readonly #ungate: () => void;

  constructor(ctx: QuestionsContext) {
    this.#ctx = ctx;
    this.#ungate = gateQuestions(ctx.runner, this.#onQuestion);
    this.#poll = setInterval(() => this.#pollAll(), ctx.renewMs);
  }

  #script(questionId: string, s: FleetScript, args: string[], ms = this.#ctx.commandTimeoutMs): Promise<unknown> {
    return runScript(this.#ctx.redis, s, [this.#ctx.keys.question(questionId)], args, ms);
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
   * (answerable here only).
   */
  async close(): Promise<void> {
    this.#ungate();
    clearInterval(this.#poll);
    this.#poll = undefined;
    await Promise.allSettled([...this.#open.keys()].map((key) => {
      const [sessionId, turnId] = JSON.parse(key) as [string, string];
      return this.endTurn(sessionId, turnId);
    }));
  }
}
