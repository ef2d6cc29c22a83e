/**
 * `FleetClient` (`Fleet.connect`): a stop-only member of the fleet, for a process that runs no turns
 * (an API gateway, a job dashboard). It stops, answers and reads turns through the fleet exactly as
 * a `Fleet` does (both ask through `FleetRelay`), with no `TurnRunner`.
 *
 * Rules kept here:
 * 1. It owns nothing in Redis: it registers no turn, renews and sweeps nothing, and writes no key
 *    of its own (a stop it sends is recorded on the turn's, or the session's pending, keys, as any
 *    instance's stop is).
 * 2. One connection besides the caller's client, which it never closes: a `duplicate()` subscribed
 *    to its own channel (`NodeChannel`), because the owners' acknowledgements (`ended` for a stop,
 *    `answered` for an answer) are published there. It is closed by `close()`.
 */
import { fleetKeys } from './keys.js';
import { parseMessage } from './messages.js';
import { NodeChannel } from './node-channel.js';
import { ensureConnecting } from './client.js';
import { resolveClientOptions, type FleetAnswerOptions, type FleetClientOptions, type FleetStopOptions, type ResolvedClientOptions } from './options.js';
import { TurnRecords } from './records.js';
import { FleetRelay } from './relay.js';
import type { AnswerReply, FleetTurn, StopAnswer } from './answers.js';

/**
 * @example
 * const fleet = await Fleet.connect({ redis: createClient({ url: process.env.REDIS_URL }) });
 * const answer = await fleet.stop(sessionId, { turnId });   // as Fleet.stop: stopped, pending, …
 * await fleet.answer(questionId, { colour: 'blue' });       // as Fleet.answer
 * await fleet.close();                                      // the caller's client stays open
 */
export class FleetClient {
  /** This client's name in Redis (`options.nodeId`): acknowledgements come to its channel. */
  readonly nodeId: string;
  /** `CLIENT SETNAME` of its one connection (the subscriber), to find it in `CLIENT LIST` (single-node clients only). */
  readonly subscriberName: string;
  readonly #o: ResolvedClientOptions;
  readonly #relay: FleetRelay;
  readonly #channel: NodeChannel;
  #closed: Promise<void> | undefined;
  readonly #onClientError = () => { /* the client reconnects by itself; a request meanwhile answers relay_unavailable */ };

  private constructor(o: ResolvedClientOptions) {
    this.#o = o;
    this.nodeId = o.nodeId;
    this.subscriberName = `fullstop-fleet-client:${o.nodeId}`;
    const keys = fleetKeys(o.prefix);
    const closed = () => this.#closed !== undefined;
    // Rule 1: the records' lease is never used here (a client registers and renews nothing).
    const records = new TurnRecords({ ...o, keys, leaseMs: 0 });
    this.#relay = new FleetRelay({ ...o, keys, records, name: 'FleetClient', closed });
    o.redis.on('error', this.#onClientError);
    void ensureConnecting(o.redis, closed);
    this.#channel = new NodeChannel(o.redis, keys, o.nodeId, this.subscriberName, (raw) => {
      const msg = parseMessage(raw);
      if (msg?.kind === 'ended') this.#relay.onEnded(msg);
      else if (msg?.kind === 'answered') this.#relay.onAnswered(msg);
      // `stop` and `answer` are for a turn's owner: a client owns none.
    }, closed, o.commandTimeoutMs);
  }

  /** `Fleet.connect` (docs there). */
  static async connect(options: FleetClientOptions): Promise<FleetClient> {
    const client = new FleetClient(resolveClientOptions(options));
    await client.#channel.ready();
    return client;
  }

  /** As `Fleet.stop`: stop a session's turn wherever it runs, and say what became of it. */
  stop(sessionId: string, options: FleetStopOptions = {}): Promise<StopAnswer> {
    return this.#relay.stop(sessionId, options);
  }

  /** As `Fleet.answer`: answer a question asked in a fleet turn on any instance. */
  answer(questionId: string, answer: unknown, options: FleetAnswerOptions = {}): Promise<AnswerReply> {
    return this.#relay.answer(questionId, answer, options);
  }

  /** As `Fleet.turn`: the session's latest fleet turn as Redis has it; null when there is none. */
  turn(sessionId: string): Promise<FleetTurn | null> {
    return this.#relay.turn(sessionId);
  }

  /**
   * Leave: waiting stops answer `cancelling`, answers waiting for their owner are undone unless the
   * owner took them (settled within `commandTimeoutMs`); then its connection is closed. Later calls
   * answer `relay_unavailable`. The caller's client is left open. A second call returns the first's promise.
   */
  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    await this.#relay.close();
    await this.#channel.close();
    this.#o.redis.off('error', this.#onClientError);
  }

  /** Stops waiting for their acknowledgement, answers under way, its connection open (0, 0, false after `close()`). */
  stats(): { waitingStops: number; answering: number; connected: boolean } {
    return { waitingStops: this.#relay.waitingStops, answering: this.#relay.answering, connected: this.#channel.isOpen };
  }
}
