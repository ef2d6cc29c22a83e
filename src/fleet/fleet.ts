/**
 * `Fleet`: stop a turn from any server instance, over Redis. The facade: it checks arguments,
 * runs the scripts (src/fleet/scripts.ts, one per decision) and hands the owner's side to
 * `Leases` (and a turn's last write to `TurnEnds`), questions to `Questions`, the sweep to
 * `Sweep`, and the requester's side (stop, answer, turn) to `FleetRelay`, which a stop-only
 * client (`Fleet.connect`, src/fleet/fleet-client.ts) shares. docs/fleet.md has the key schema
 * and the failure table.
 */
import { randomUUID } from 'node:crypto';
import { FleetReasons } from '../constants.js';
import { checkFunction, checkId, SessionBusyError, TurnIdUsedError } from '../errors.js';
import { isTerminalStatus } from '../ledger/entry.js';
import { nameNode } from '../turn/answer-reply.js';
import { runnerHooks } from '../turn/runner-hooks.js';
import type { Turn } from '../turn/active-turn.js';
import type { StopReport } from '../turn/report.js';
import type { AnswerReply, FleetOutcome, FleetTurn, StopAnswer } from './answers.js';
import { Questions } from './questions.js';
import { ensureConnecting } from './client.js';
import { NodeChannel } from './node-channel.js';
import { FleetClosedError, FleetTurnRefusedError, FleetUnavailableError } from './errors.js';
import { fleetKeys, type FleetKeys } from './keys.js';
import { Leases, type OwnedTurn } from './leases.js';
import { parseMessage } from './messages.js';
import {
  resolveFleetOptions, resolveRunOptions, type FleetAnswerOptions, type FleetClientOptions, type FleetOptions, type FleetRunOptions, type FleetStopOptions, type ResolvedFleetOptions,
} from './options.js';
import { TurnRecords, type RecordedStop } from './records.js';
import { FleetRelay } from './relay.js';
import { FleetClient } from './fleet-client.js';
import { Sweep } from './sweep.js';
import { TurnClaims } from './turn-claims.js';
import { TurnEnds } from './turn-ends.js';

/**
 * One instance's membership of the fleet. Turns started with `fleet.run` are registered in Redis,
 * so `fleet.stop` on any instance reaches them.
 *
 * @example
 * const redis = createClient({ url: process.env.REDIS_URL });
 * const fleet = await Fleet.start({ redis, runner });
 * app.post('/turn', (req) => fleet.run(req.sessionId, body));
 * app.post('/stop', async (req) => (await fleet.stop(req.sessionId)).outcome);
 */
export class Fleet {
  /** This instance's name in Redis (`options.nodeId`). */
  readonly nodeId: string;
  /** `CLIENT SETNAME` of the subscriber connection, to find it in `CLIENT LIST` (single-node clients only). */
  readonly subscriberName: string;
  readonly #o: ResolvedFleetOptions;
  readonly #keys: FleetKeys;
  readonly #records: TurnRecords;
  readonly #claims: TurnClaims;
  readonly #channel: NodeChannel;
  readonly #leases: Leases;
  readonly #sweep: Sweep;
  readonly #questions: Questions;
  readonly #relay: FleetRelay;
  readonly #ends: TurnEnds;
  readonly #onClientError = () => { /* the client reconnects by itself; a request meanwhile fails fast */ };
  readonly #onMessage = (raw: string) => {
    const msg = parseMessage(raw);
    if (msg?.kind === 'stop') this.#leases.onStop(msg);
    else if (msg?.kind === 'ended') this.#relay.onEnded(msg);
    else if (msg?.kind === 'answer') this.#questions.onAnswer(msg);
    else if (msg?.kind === 'answered') this.#relay.onAnswered(msg);
  };
  #closed: Promise<void> | undefined;
  /** Removes the hold that has `runner.shutdown()` wait for the records of the turns it stopped. */
  readonly #unholdShutdown: () => void;

  private constructor(o: ResolvedFleetOptions) {
    this.#o = o;
    this.nodeId = o.nodeId;
    this.subscriberName = `fullstop-fleet:${o.nodeId}`;
    this.#keys = fleetKeys(o.prefix);
    this.#records = new TurnRecords({ ...o, keys: this.#keys });
    this.#claims = new TurnClaims({ ...o, keys: this.#keys });
    const closed = () => this.#closed !== undefined;
    o.redis.on('error', this.#onClientError);
    void ensureConnecting(o.redis, closed);
    this.#channel = new NodeChannel(o.redis, this.#keys, o.nodeId, this.subscriberName, this.#onMessage, closed, o.commandTimeoutMs);
    this.#leases = new Leases({ ...o, records: this.#records, claims: this.#claims });
    this.#sweep = new Sweep({ ...o, keys: this.#keys, records: this.#records });
    this.#ends = new TurnEnds({ ...o, records: this.#records, claims: this.#claims, release: (owned) => this.#leases.release(owned), closed });
    this.#questions = new Questions({ ...o, keys: this.#keys, ownedEpoch: (s, t) => this.#leases.epochOf(s, t) });
    this.#relay = new FleetRelay({ ...o, keys: this.#keys, records: this.#records, name: 'Fleet', closed });
    // runner.shutdown() resolves only once the records of the turns it stopped say `cancelled`, so
    // a stop sent to another instance right after answers already_finished, not after a sweep.
    // (A runner of another copy of the library has no hooks: its shutdown does not wait for them.)
    this.#unholdShutdown = runnerHooks(o.runner)?.holdShutdown((reports) => this.#recorded(reports)) ?? (() => {});
    // The runner's own answers (`runner.answer`) name this node, as the fleet's do.
    nameNode(o.runner, o.nodeId);
  }

  /**
   * Join the fleet: subscribe to this node's channel, start renewing and sweeping. Resolves once
   * subscribed, or — while Redis is unreachable — after the first connection error or
   * `commandTimeoutMs`; the fleet keeps reconnecting (node-redis's reconnect strategy) meanwhile.
   */
  static async start(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(resolveFleetOptions(options));
    await fleet.#channel.ready();
    return fleet;
  }

  /**
   * Join the fleet as a stop-only client: a process that runs no turns (an API gateway) stops and
   * answers through the fleet, and reads its turns, with no `TurnRunner`. The client has `stop`,
   * `answer`, `turn` and `close` only, answering as a `Fleet`'s do; it renews and sweeps nothing,
   * writes no key of its own, and keeps one connection besides the caller's client (a
   * `duplicate()`, subscribed to its own channel for the owners' acknowledgements). Resolves as
   * `Fleet.start` does: once subscribed, or while Redis is unreachable after the first connection
   * error or `commandTimeoutMs`.
   *
   * @example
   * const fleet = await Fleet.connect({ redis: createClient({ url: process.env.REDIS_URL }) });
   * app.post('/stop', async (req) => (await fleet.stop(req.sessionId, { turnId: req.turnId })).outcome);
   */
  static connect(options: FleetClientOptions): Promise<FleetClient> {
    return FleetClient.connect(options);
  }

  /**
   * Run one turn of `sessionId` on this instance's runner, registered in Redis first: the record
   * `{ sessionId, turnId, epoch, node }` is what any instance's `stop` reaches. Records the
   * terminal status when the turn ends. Rejects with `FleetUnavailableError` when Redis cannot be
   * reached (unless `onUnavailable: 'local'`), `FleetTurnRefusedError` when the session already has
   * a live fleet turn, and `TurnIdUsedError` when the turn id is used: recorded in this session, or
   * running (or finished within `finishedTtlMs`) in another session of the fleet (its claim,
   * src/fleet/turn-claims.ts, is taken before the registration: nothing is registered or run). A turn id some instance's `stop` named before it
   * started (answered `pending`) starts nothing of the body and resolves `cancelled`, with that
   * stop's reason and grace. `input` and `signal` are the runner's (`RunOptions`): the user's
   * message, recorded on `turn_started`, and a caller's signal whose abort stops the turn. Every
   * argument is checked (ids at most `MAX_ID_LENGTH` characters) before anything reaches Redis.
   */
  async run<T>(sessionId: string, body: (turn: Turn) => Promise<T>, options: FleetRunOptions = {}): Promise<FleetOutcome<T>> {
    checkId('sessionId', sessionId);
    checkFunction('body', body);
    const { turnId: given, runOptions } = resolveRunOptions(options);
    if (this.#closed !== undefined) throw new FleetClosedError('Fleet.run: the fleet is closed; it starts no turn');
    const { runner } = this.#o;
    if (runner.registry.currentToken(sessionId) !== undefined) {
      throw new SessionBusyError(`Fleet.run: session ${JSON.stringify(sessionId)} already has a running turn; stop it first`, sessionId);
    }
    const turnId = given ?? `turn-${randomUUID()}`;
    const owned = this.#leases.claim(sessionId, turnId);
    if (owned === undefined) throw new TurnIdUsedError(`Fleet.run: turn ${JSON.stringify(turnId)} of session ${JSON.stringify(sessionId)} is already being started on this node; a turn id is used once`, turnId);
    let epoch: number;
    let stop: RecordedStop | undefined;
    try {
      ({ epoch, stop } = await this.#register(owned));
    } catch (error) {
      this.#leases.release(owned);
      if (error instanceof FleetUnavailableError && this.#o.onUnavailable === 'local') {
        return { ...(await runner.run(sessionId, body, { turnId, ...runOptions })), unregistered: true };
      }
      throw error;
    }
    // A stop recorded before the registration (pending) stops the turn the moment it begins:
    // runner.run begins it synchronously (its token is current before it first awaits), so the
    // stop reaches it before its body can start. Never through the runner's own pending book,
    // which may not keep it (`pendingStopMs: 0`, or full) and keeps no grace.
    const outcome$ = runner.run(sessionId, body, { turnId, ...runOptions });
    if (stop !== undefined) void runner.stop(sessionId, { turnId, reason: stop.reason, ...(stop.graceMs === undefined ? {} : { graceMs: stop.graceMs }) });
    this.#leases.started(owned);
    let outcome: Awaited<typeof outcome$>;
    try {
      outcome = await outcome$;
    } catch (error) {
      await this.#questions.endTurn(sessionId, turnId);
      await this.#ends.record(owned, 'failed', error instanceof Error ? error.message : String(error), undefined);
      throw error;
    }
    await this.#questions.endTurn(sessionId, turnId);
    const reason = outcome.status === 'cancelled' ? outcome.report.reason
      : outcome.status === 'failed' ? (outcome.error instanceof Error ? outcome.error.message : String(outcome.error)) : undefined;
    await this.#ends.record(owned, outcome.status, reason, outcome.status === 'cancelled' ? outcome.report : undefined);
    return { ...outcome, epoch };
  }

  /** Settles once this node has let go of every turn of `reports` it owns (its terminal write done or given up). */
  async #recorded(reports: readonly StopReport[]): Promise<void> {
    const stopped = new Set(reports.map((r) => `${r.sessionId}\0${r.turnId}`));
    await Promise.all(this.#leases.turns().filter((o) => stopped.has(`${o.sessionId}\0${o.turnId}`)).map((o) => o.released));
  }

  async #register(owned: OwnedTurn): Promise<{ epoch: number; stop: RecordedStop | undefined }> {
    if (!this.#o.redis.isReady) throw new FleetUnavailableError('Fleet.run: Redis is not reachable, so the turn cannot be registered');
    await this.#claim(owned);
    try {
      return await this.#registerRecord(owned);
    } catch (error) {
      // The turn never began: its id is given back (turn-claims.ts, rule 4) before the refusal is.
      await this.#claims.drop(owned.turnId, owned.holder).catch(() => {});
      throw error;
    }
  }

  /** Takes the turn id's claim, fleet-wide: a `TurnIdUsedError` when another session holds it. */
  async #claim(owned: OwnedTurn): Promise<void> {
    let taken: boolean;
    try {
      taken = await this.#claims.take(owned.turnId, owned.sessionId, owned.holder);
    } catch (cause) {
      throw new FleetUnavailableError(`Fleet.run: claiming the turn id in Redis failed (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
    }
    if (!taken) {
      // Never names the other session: the caller may not be its user.
      throw new TurnIdUsedError(`Fleet.run: turn ${JSON.stringify(owned.turnId)} is running, or finished within finishedTtlMs, in another session of this fleet; a turn id is used once fleet-wide`, owned.turnId);
    }
  }

  async #registerRecord(owned: OwnedTurn): Promise<{ epoch: number; stop: RecordedStop | undefined }> {
    const { leaseMs } = this.#o;
    const sentAt = performance.now();
    // The lease index entry goes first, on the same connection (on a cluster, maybe another
    // shard's: then it is only as sure as any hint). Its score is this clock's guess of the
    // deadline; the sweep re-checks the record, and renewals write Redis's own deadline.
    this.#records.index([[String(Date.now() + leaseMs), owned.sessionId, owned.turnId]]).catch(() => {});
    let reply: Awaited<ReturnType<TurnRecords['register']>>;
    try {
      reply = await this.#records.register(owned.sessionId, owned.turnId);
    } catch (cause) {
      throw new FleetUnavailableError(`Fleet.run: registering the turn in Redis failed (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
    }
    // A refused registration drops the index entry it sent, unless it is a live turn's own.
    if (reply.kind === 'busy' || (reply.kind === 'exists' && isTerminalStatus(reply.status))) this.#records.unindex(owned.sessionId, owned.turnId).catch(() => {});
    if (reply.kind === 'exists') throw new TurnIdUsedError(`Fleet.run: turn ${JSON.stringify(owned.turnId)} is already recorded for session ${JSON.stringify(owned.sessionId)}; a turn id is used once`, owned.turnId);
    if (reply.kind === 'busy') {
      throw new FleetTurnRefusedError(`Fleet.run: session ${JSON.stringify(owned.sessionId)} already runs turn ${JSON.stringify(reply.turnId)} on node ${JSON.stringify(reply.node)}; stop it first`, owned.sessionId);
    }
    this.#leases.registered(owned, reply.epoch, sentAt);
    return reply;
  }

  /**
   * Stop a session's turn wherever it runs. The stop is recorded in Redis (status `cancelling`)
   * before it is published to the owner; with `wait` (the default) the answer is the owner's
   * acknowledgement (`stopped`, with its StopReport) or, after `timeoutMs`, `cancelling`. A
   * `turnId` no instance has registered yet is kept for its `run` (`pending`, `pendingStopMs`).
   * Never rejects for Redis's sake: `relay_unavailable` says Redis could not be reached.
   */
  stop(sessionId: string, options: FleetStopOptions = {}): Promise<StopAnswer> {
    return this.#relay.stop(sessionId, options);
  }

  /**
   * Answer a question asked in a fleet turn (`turn.ask` on any instance: the runner's `question`
   * event gives its `questionId`). The first answer recorded fleet-wide wins; it is relayed to the
   * owner, whose `runner.answer` takes it. Never rejects for Redis's sake (`relay_unavailable`);
   * throws a TypeError or RangeError naming the argument for a bad one (an `answer` JSON cannot
   * encode, or of more than `maxAnswerBytes` bytes of JSON), before anything reaches Redis. See
   * `AnswerReply`.
   *
   * @example
   * runner.on('question', ({ questionId, question }) => sendToUser(questionId, question));
   * app.post('/answer', async (req) => (await fleet.answer(req.questionId, req.answer)).outcome);
   */
  answer(questionId: string, answer: unknown, options: FleetAnswerOptions = {}): Promise<AnswerReply> {
    return this.#relay.answer(questionId, answer, options);
  }

  /** The session's latest fleet turn as Redis has it; null when there is none (or Redis is unreachable: rejects). */
  turn(sessionId: string): Promise<FleetTurn | null> {
    return this.#relay.turn(sessionId);
  }

  /** Run one sweep now (the timer runs one every `sweepMs`); resolves with the turns it marked `interrupted`. */
  sweep(): Promise<number> {
    return this.#sweep.run();
  }

  /**
   * Leave the fleet: stop renewing and sweeping, unsubscribe and close the subscriber. Turns this
   * node still runs are released: their records become `interrupted` (reason `fleet.closed`); they
   * keep running locally, where `runner.stop` still reaches them. Waiting stops answer `cancelling`;
   * answers waiting for their owner's confirmation are undone unless the owner has taken them
   * (`relay_unavailable`, saying the fleet closed) and have settled when this resolves, as has a
   * sweep under way (with its `closeAbandonedTurn` calls on the runner's store, whose own bound
   * applies: close the store after the fleet). The caller's client is left open.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#unholdShutdown();
    nameNode(this.#o.runner, undefined, this.nodeId);
    this.#leases.close();
    const swept = this.#sweep.close();
    const questionsClosed = Promise.all([this.#questions.close(), this.#relay.close()]);
    this.#ends.close();
    await Promise.allSettled(this.#leases.turns().map(async (owned) => {
      if (owned.epoch === undefined || owned.ending) return;
      await this.#ends.record(owned, 'interrupted', FleetReasons.closed, undefined);
    }));
    await questionsClosed;
    await swept;
    await this.#channel.close();
    this.#o.redis.off('error', this.#onClientError);
  }

  /** What this instance holds now: owned turns, waiting stops, turn ends to retry, open questions, live timers (all 0 after `close()`). */
  stats(): { ownedTurns: number; waitingStops: number; retries: number; openQuestions: number; timers: number } {
    return {
      ownedTurns: this.#leases.size, waitingStops: this.#relay.waitingStops, retries: this.#ends.size, openQuestions: this.#questions.size,
      timers: this.#leases.timers + this.#sweep.timers + this.#questions.timers + this.#ends.size,
    };
  }
}
