/**
 * The requester's side of the fleet: what any process that shares the fleet's Redis may ask of it —
 * stop a session's turn wherever it runs, answer a question asked in any instance's turn, read a
 * session's latest turn — with no runner of its own. `Fleet` (an instance that runs turns) and
 * `FleetClient` (a stop-only process, `Fleet.connect`) both ask through it, so both answer alike.
 *
 * Rules kept here:
 * 1. Every argument is checked, and every refusal thrown, before anything reaches Redis.
 * 2. Never rejects for Redis's sake: `relay_unavailable` says Redis could not be reached (`turn`,
 *    which has no such answer, rejects with `FleetUnavailableError`).
 * 3. An acknowledgement (`ended`, `answered`) comes on this node's channel, to the subscriber of
 *    whoever owns the relay; it routes them here (`onEnded`, `onAnswered`). A stop's waiter is
 *    registered before its script is sent (src/fleet/requests.ts says why).
 */
import { checkId } from '../errors.js';
import type { TerminalStatus } from '../ledger/entry.js';
import type { StopReport } from '../turn/report.js';
import { AnswerRequests } from './answer-requests.js';
import type { AnswerReply, FleetTurn, StopAnswer } from './answers.js';
import type { FleetRedisClient } from './client.js';
import { FleetUnavailableError } from './errors.js';
import type { FleetKeys } from './keys.js';
import type { AnsweredMessage, EndedMessage } from './messages.js';
import { answerJson, resolveAnswerOptions, resolveStopOptions, type FleetAnswerOptions, type FleetStopOptions } from './options.js';
import type { TurnRecords } from './records.js';
import { StopRequests } from './requests.js';

export interface RelayContext {
  redis: FleetRedisClient; keys: FleetKeys; records: TurnRecords;
  /** This node's name: acknowledgements come to its channel. */
  nodeId: string;
  commandTimeoutMs: number; maxAnswerBytes: number;
  /** The owner's name in messages: `Fleet` or `FleetClient`. */
  name: 'Fleet' | 'FleetClient';
  /** True once its owner is closing: every request answers `relay_unavailable`. */
  closed(): boolean;
}

export class FleetRelay {
  readonly #ctx: RelayContext;
  readonly #stops = new StopRequests();
  readonly #answers: AnswerRequests;

  constructor(ctx: RelayContext) {
    this.#ctx = ctx;
    this.#answers = new AnswerRequests({ ...ctx, where: `${ctx.name}.answer` });
  }

  /** `Fleet.stop` (docs there). */
  async stop(sessionId: string, options: FleetStopOptions): Promise<StopAnswer> {
    checkId('sessionId', sessionId);
    const { turnId, reason, graceMs, wait, timeoutMs } = resolveStopOptions(options);
    const { redis, records, name } = this.#ctx;
    if (this.#ctx.closed()) return { outcome: 'relay_unavailable', sessionId, error: this.#closedError('stop') };
    if (!redis.isReady) return { outcome: 'relay_unavailable', sessionId, error: new FleetUnavailableError(`${name}.stop: Redis is not reachable`) };
    const deadline = performance.now() + timeoutMs;
    const waiting = wait ? this.#stops.wait(sessionId) : undefined;
    let reply: Awaited<ReturnType<TurnRecords['requestStop']>>;
    try {
      reply = await records.requestStop(sessionId, turnId, reason, graceMs, wait, Math.max(1, timeoutMs));
    } catch (cause) {
      waiting?.cancel();
      return { outcome: 'relay_unavailable', sessionId, error: new FleetUnavailableError(`${name}.stop: Redis did not answer (${cause instanceof Error ? cause.message : String(cause)})`, { cause }) };
    }
    if (reply.kind !== 'cancelling') waiting?.cancel();
    switch (reply.kind) {
      case 'not_found': return turnId === undefined ? { outcome: 'not_found', sessionId } : { outcome: 'not_found', sessionId, turnId };
      case 'pending': return { outcome: 'pending', sessionId, turnId: reply.turnId };
      case 'full': return { outcome: 'refused', sessionId, turnId: reply.turnId, reason, why: 'session_full' };
      case 'finished': return { outcome: 'already_finished', sessionId, turnId: reply.turnId, status: reply.status as TerminalStatus };
      case 'interrupted': return { outcome: 'interrupted', sessionId, turnId: reply.turnId, epoch: reply.epoch, node: reply.node };
    }
    const { turnId: id, epoch, node } = reply;
    const cancelling = { outcome: 'cancelling' as const, sessionId, turnId: id, epoch, node };
    if (waiting === undefined) return cancelling;
    waiting.address(id, epoch, Math.max(0, deadline - performance.now()));
    const ended = await waiting.ended;
    if (ended === undefined) return cancelling;
    if (ended.status === 'interrupted') return { outcome: 'interrupted', sessionId, turnId: id, epoch, node };
    if (ended.status === 'cancelled' && ended.report !== undefined) {
      return { outcome: 'stopped', sessionId, turnId: id, epoch, node, report: JSON.parse(ended.report) as StopReport };
    }
    return { outcome: 'already_finished', sessionId, turnId: id, status: ended.status as TerminalStatus };
  }

  /** `Fleet.answer` (docs there). */
  async answer(questionId: string, answer: unknown, options: FleetAnswerOptions): Promise<AnswerReply> {
    checkId('questionId', questionId);
    const json = answerJson(answer, this.#ctx.maxAnswerBytes);
    const { timeoutMs } = resolveAnswerOptions(options);
    if (this.#ctx.closed()) return { outcome: 'relay_unavailable', questionId, error: this.#closedError('answer') };
    return this.#answers.answer(questionId, json, timeoutMs);
  }

  /** `Fleet.turn` (docs there). */
  async turn(sessionId: string): Promise<FleetTurn | null> {
    checkId('sessionId', sessionId);
    if (!this.#ctx.redis.isReady) throw new FleetUnavailableError(`${this.#ctx.name}.turn: Redis is not reachable`);
    return this.#ctx.records.latest(sessionId);
  }

  #closedError(method: string): FleetUnavailableError {
    const { name } = this.#ctx;
    return new FleetUnavailableError(`${name}.${method}: the ${name === 'Fleet' ? 'fleet' : 'client'} is closed`);
  }

  /** Rule 3: an `ended` message on this node's channel. */
  onEnded(msg: EndedMessage): void { this.#stops.onEnded(msg); }
  /** Rule 3: an `answered` message on this node's channel. */
  onAnswered(msg: AnsweredMessage): void { this.#answers.onAnswered(msg); }

  /** Waiting stops answer `cancelling`; answers waiting for their owner are undone unless taken, settled within `commandTimeoutMs`. */
  close(): Promise<void> {
    this.#stops.cancelAll();
    return this.#answers.close();
  }

  /** Stops waiting for their acknowledgement (for leak checks). */
  get waitingStops(): number { return this.#stops.size; }
  /** Answers under way (for leak checks). */
  get answering(): number { return this.#answers.size; }
}
