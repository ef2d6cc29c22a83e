/**
 * The turns this node owns, and their leases: renewal every `renewMs` (which also reads each
 * turn's pending stop, so a missed publish costs at most one renewal), self-fencing when a lease
 * could not be renewed in time, and applying stops to the local runner.
 *
 * Rules:
 * 0. What this node owns is keyed by turn (session and turn id), never by session alone: two
 *    `fleet.run` of one session at once each hold their own claim until Redis has chosen one, so
 *    the loser's refusal can never drop the winner's claim (the turn would then run unowned:
 *    no renewal, no stop reaching it).
 * 1. A stop reaches the local turn only if the session's current token is that turn's
 *    (`registry.currentToken(sessionId)?.turnId`) and the stop names this registration's epoch.
 * 2. `confirmedUntil` is when the lease ends by this process's clock, counted from when the last
 *    successful renewal was *sent* (so it is never later than Redis's deadline). Past it, the
 *    node no longer owns the turn and stops it itself with reason `lease.lost`.
 * 3. A turn's id claim (src/fleet/turn-claims.ts) is renewed in the same round as its lease; a
 *    renewal that finds the claim another session's is a lost lease (the id is no longer this
 *    turn's). A claim renewal Redis did not answer changes nothing: the lease decides.
 */
import { FleetReasons, StopReasons } from '../constants.js';
import type { TurnRunner } from '../turn/runner.js';
import type { FleetRedisClient } from './client.js';
import { leaseMember } from './keys.js';
import type { StopMessage } from './messages.js';
import type { RenewReply, TurnRecords } from './records.js';
import { newHolder, type TurnClaims } from './turn-claims.js';

/** A claim's key (rule 0): the lease index's member, one per (session, turn id). */
const turnKey = leaseMember;

export interface OwnedTurn {
  readonly sessionId: string;
  readonly turnId: string;
  /** This run's name as the creator of its turn id's claim (turn-claims.ts, rule 1). */
  readonly holder: string;
  /** Undefined until the register script has answered. */
  epoch: number | undefined;
  /** performance.now() at which the lease is lost (rule 2). */
  confirmedUntil: number;
  /** A stop that arrived before the registration's reply (applied once the turn runs). */
  early: StopMessage | undefined;
  /** The local runner has begun the turn. */
  running: boolean;
  /** Stopped by this node for lease.lost. */
  fenced: boolean;
  /** The terminal write is under way or done: no more renewals. */
  ending: boolean;
  /** A renewal of this turn is under way (it may be retrying through a slot migration). */
  renewing: boolean;
  /** Settles when this node lets go of the turn (its terminal write done, or given up). */
  readonly released: Promise<void>;
}

/** Resolvers of `OwnedTurn.released`, kept here so only `release` settles it. */
const letGo = new WeakMap<OwnedTurn, () => void>();

export interface LeaseContext {
  redis: FleetRedisClient; runner: TurnRunner; records: TurnRecords; claims: TurnClaims; nodeId: string; leaseMs: number; renewMs: number;
}

export class Leases {
  readonly #ctx: LeaseContext;
  /** Owned turns by `turnKey` (rule 0). */
  readonly #owned = new Map<string, OwnedTurn>();
  #renewTimer: NodeJS.Timeout | undefined;
  #fenceTimer: NodeJS.Timeout | undefined;

  constructor(ctx: LeaseContext) {
    this.#ctx = ctx;
    this.#renewTimer = setInterval(() => void this.renew(), ctx.renewMs);
  }

  get size(): number { return this.#owned.size; }
  /** Live timers (the renewal interval, the fence timer). */
  get timers(): number { return Number(this.#renewTimer !== undefined) + Number(this.#fenceTimer !== undefined); }
  turns(): OwnedTurn[] { return [...this.#owned.values()]; }

  /**
   * Claim a turn before its registration is sent, so a stop that overtakes the reply is kept.
   * Undefined when this node already holds a claim on that very turn (rule 0).
   */
  claim(sessionId: string, turnId: string): OwnedTurn | undefined {
    const key = turnKey(sessionId, turnId);
    if (this.#owned.has(key)) return undefined;
    let resolve!: () => void;
    const owned: OwnedTurn = {
      sessionId, turnId, holder: newHolder(this.#ctx.nodeId), epoch: undefined, confirmedUntil: Infinity, early: undefined, running: false, fenced: false, ending: false, renewing: false,
      released: new Promise<void>((r) => { resolve = r; }),
    };
    letGo.set(owned, resolve);
    this.#owned.set(key, owned);
    return owned;
  }

  /** The registration answered: the lease runs from `sentAt` (rule 2). */
  registered(owned: OwnedTurn, epoch: number, sentAt: number): void {
    owned.epoch = epoch;
    owned.confirmedUntil = sentAt + this.#ctx.leaseMs;
    this.#armFence();
  }

  /** The runner has begun the turn: apply a stop that came early. */
  started(owned: OwnedTurn): void {
    owned.running = true;
    if (owned.early !== undefined && owned.early.epoch === owned.epoch) this.#stopLocal(owned, owned.early.reason, owned.early.graceMs);
    owned.early = undefined;
  }

  release(owned: OwnedTurn): void {
    const key = turnKey(owned.sessionId, owned.turnId);
    if (this.#owned.get(key) === owned) this.#owned.delete(key);
    letGo.get(owned)?.();
    this.#armFence();
  }

  /** The epoch of a turn this node owns, registered and running; undefined otherwise. */
  epochOf(sessionId: string, turnId: string): number | undefined {
    const owned = this.#owned.get(turnKey(sessionId, turnId));
    return owned?.running === true && !owned.ending ? owned.epoch : undefined;
  }

  /** A `stop` message for one of this node's turns (rule 1). */
  onStop(msg: StopMessage): void {
    const owned = this.#owned.get(turnKey(msg.sessionId, msg.turnId));
    if (owned === undefined) return;
    if (owned.epoch === undefined) { owned.early = msg; return; }
    if (owned.epoch !== msg.epoch || !owned.running) return;
    this.#stopLocal(owned, msg.reason, msg.graceMs);
  }

  #stopLocal(owned: OwnedTurn, reason: string | undefined, graceMs: number | undefined): void {
    const { runner } = this.#ctx;
    if (runner.registry.currentToken(owned.sessionId)?.turnId !== owned.turnId) return;
    runner.stop(owned.sessionId, { reason: reason || StopReasons.user, graceMs }).catch(() => { /* the outcome reports it */ });
  }

  /** Rule 2: stop every owned turn whose lease has run out by this clock. */
  #fence(): void {
    const now = performance.now();
    for (const owned of this.#owned.values()) {
      if (owned.fenced || owned.ending || !owned.running || now < owned.confirmedUntil) continue;
      owned.fenced = true;
      this.#stopLocal(owned, FleetReasons.leaseLost, undefined);
    }
    this.#armFence();
  }

  /** One timer for the earliest lease end, re-armed on every change. */
  #armFence(): void {
    clearTimeout(this.#fenceTimer);
    this.#fenceTimer = undefined;
    let earliest = Infinity;
    for (const owned of this.#owned.values()) {
      if (!owned.fenced && !owned.ending && owned.confirmedUntil < earliest) earliest = owned.confirmedUntil;
    }
    if (earliest === Infinity) return;
    this.#fenceTimer = setTimeout(() => this.#fence(), Math.max(0, earliest - performance.now()));
  }

  /**
   * Renew every owned lease (one script each, sent in one go); a reply with a pending stop applies
   * it (the lost wake-up path); a `lost` reply fences the turn. A renewal refused by a slot
   * migration, or unanswered (its shard failing over), is waited for until its lease would end
   * (`runScript`); meanwhile that turn is skipped by the next rounds, the others are not. Its id
   * claim is renewed alongside (rule 3). So each
   * turn's reply is applied as it arrives: a turn on a healthy shard is never held up by another
   * shard's renewal of the same round (it would then lose its lease with it). The round's index
   * write waits for all, and skips a turn a later round has renewed since (the index is a hint).
   */
  async renew(): Promise<void> {
    const { redis, records, claims, leaseMs, renewMs } = this.#ctx;
    if (!redis.isReady) return;
    const due = [...this.#owned.values()].filter((o) => o.epoch !== undefined && !o.ending && !o.fenced && !o.renewing);
    if (due.length === 0) return;
    const sentAt = performance.now();
    const renewed: Array<[leaseUntil: string, owned: OwnedTurn]> = [];
    await Promise.all(due.map(async (owned) => {
      owned.renewing = true;
      let reply: RenewReply | undefined;
      const ms = Math.max(renewMs, owned.confirmedUntil - sentAt);
      try {
        const claimed = claims.take(owned.turnId, owned.sessionId, owned.holder, ms).catch(() => true); // rule 3: no answer, no verdict
        reply = await records.renew(owned.sessionId, owned.turnId, owned.epoch!, ms);
        if (!(await claimed)) reply = { kind: 'lost' };
      } catch {
        // No reply: the lease is not pushed, and the fence stops the turn when it runs out.
      } finally {
        owned.renewing = false;
      }
      if (reply === undefined || owned.ending) return;
      if (reply.kind === 'ok') {
        owned.confirmedUntil = sentAt + leaseMs;
        renewed.push([reply.leaseUntil, owned]);
        if (reply.stop !== undefined && owned.running) this.#stopLocal(owned, reply.stop.reason, reply.stop.graceMs);
      } else {
        owned.confirmedUntil = -Infinity;
        this.#fence();
      }
    }));
    // A turn renewed again by a later round already has a newer deadline in the index.
    const index = renewed.filter(([, o]) => o.confirmedUntil === sentAt + leaseMs && !o.ending)
      .map(([leaseUntil, o]): [string, string, string] => [leaseUntil, o.sessionId, o.turnId]);
    if (index.length > 0) records.index(index).catch(() => { /* a hint; the next renewal writes it again */ });
    this.#fence();
  }

  close(): void {
    clearInterval(this.#renewTimer);
    clearTimeout(this.#fenceTimer);
    this.#renewTimer = undefined;
    this.#fenceTimer = undefined;
  }
}
