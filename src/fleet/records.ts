/**
 * The fleet's calls into Redis, one method per script (src/fleet/scripts.ts), with typed replies.
 * Session and turn ids cross here, and only here, in their wire form (src/fleet/wire-id.ts): every
 * caller hands in and gets back the ids exactly as given to `fleet.run` / `fleet.stop`.
 */
import { StopReasons } from '../constants.js';
import type { FleetTurn } from './answers.js';
import { command, type FleetRedisClient } from './client.js';
import { leaseMember, type FleetKeys } from './keys.js';
import { runScript, SCRIPTS } from './scripts.js';
import { fromWire, toWire } from './wire-id.js';

export interface RecordsContext {
  redis: FleetRedisClient; keys: FleetKeys; nodeId: string; leaseMs: number; finishedTtlMs: number;
  pendingStopMs: number; maxPendingStops: number; commandTimeoutMs: number;
}

/** A stop recorded for a turn: its reason and grace (undefined: the owner runner's). */
export interface RecordedStop { reason: string; graceMs: number | undefined }

export type RegisterReply =
  | { kind: 'ok'; epoch: number; stop: RecordedStop | undefined }
  | { kind: 'exists'; status: string }
  | { kind: 'busy'; turnId: string; node: string };

export type StopReply =
  | { kind: 'cancelling'; turnId: string; epoch: number; node: string }
  | { kind: 'finished'; turnId: string; status: string }
  | { kind: 'interrupted'; turnId: string; epoch: number; node: string }
  | { kind: 'pending'; turnId: string }
  | { kind: 'full'; turnId: string }
  | { kind: 'not_found' };

export type RenewReply = { kind: 'ok'; leaseUntil: string; stop: RecordedStop | undefined } | { kind: 'lost' };

export type ReapReply = { kind: 'interrupted' } | { kind: 'alive'; leaseUntil: string } | { kind: 'gone' };

const stopOf = (flag: string | undefined, reason: string | undefined, grace: string | undefined): RecordedStop | undefined =>
  (flag === '1' ? { reason: reason || StopReasons.user, graceMs: grace === undefined || grace === '' ? undefined : Number(grace) } : undefined);

export class TurnRecords {
  readonly #ctx: RecordsContext;

  constructor(ctx: RecordsContext) {
    this.#ctx = ctx;
  }

  #run(sessionId: string, script: (typeof SCRIPTS)[keyof typeof SCRIPTS], args: string[], ms = this.#ctx.commandTimeoutMs): Promise<string[]> {
    return runScript(this.#ctx.redis, script, this.#ctx.keys.session(sessionId), args, ms) as Promise<string[]>;
  }

  /** `register`: the turn's record, with its epoch (and a pending stop it took). */
  async register(sessionId: string, turnId: string): Promise<RegisterReply> {
    const { nodeId, leaseMs, finishedTtlMs, keys } = this.#ctx;
    const r = await this.#run(sessionId, SCRIPTS.register,
      [toWire(sessionId), toWire(turnId), nodeId, String(Math.ceil(leaseMs)), String(finishedTtlMs), keys.channelPrefix]);
    if (r[0] === 'exists') return { kind: 'exists', status: r[1]! };
    if (r[0] === 'busy') return { kind: 'busy', turnId: fromWire(r[1]!), node: r[2]! };
    return { kind: 'ok', epoch: Number(r[1]), stop: stopOf(r[3], r[4], r[5]) };
  }

  /** `request_stop`: record (and publish) a stop of the session's latest turn, or of `turnId`. */
  async requestStop(sessionId: string, turnId: string | undefined, reason: string, graceMs: number | undefined, wantAck: boolean, ms: number): Promise<StopReply> {
    const { nodeId, finishedTtlMs, keys, pendingStopMs, maxPendingStops } = this.#ctx;
    const r = await this.#run(sessionId, SCRIPTS.requestStop,
      [toWire(sessionId), turnId === undefined ? '' : toWire(turnId), nodeId, reason, graceMs === undefined ? '' : String(graceMs),
        String(finishedTtlMs), keys.channelPrefix, wantAck ? '1' : '0', String(pendingStopMs), String(maxPendingStops)], ms);
    const [kind, id, third, fourth] = r;
    switch (kind) {
      case 'cancelling': return { kind, turnId: fromWire(id!), epoch: Number(third), node: fourth! };
      case 'interrupted': return { kind, turnId: fromWire(id!), epoch: Number(third), node: fourth! };
      case 'finished': return { kind, turnId: fromWire(id!), status: third! };
      case 'pending': return { kind, turnId: fromWire(id!) };
      case 'full': return { kind, turnId: fromWire(id!) };
      default: return { kind: 'not_found' };
    }
  }

  /** `renew_lease`: push the lease of this node's turn, and read its pending stop. */
  async renew(sessionId: string, turnId: string, epoch: number, ms: number): Promise<RenewReply> {
    const { nodeId, leaseMs, finishedTtlMs, keys } = this.#ctx;
    const r = await this.#run(sessionId, SCRIPTS.renewLease,
      [toWire(turnId), String(epoch), nodeId, String(Math.ceil(leaseMs)), String(finishedTtlMs), keys.channelPrefix], ms);
    return r[0] === 'ok' ? { kind: 'ok', leaseUntil: r[1]!, stop: stopOf(r[2], r[3], r[4]) } : { kind: 'lost' };
  }

  /** `record_end`: the owner's terminal write; false when refused (the turn is no longer its own). */
  async recordEnd(sessionId: string, turnId: string, epoch: number, status: string, reason: string | undefined, reportJson: string | undefined): Promise<boolean> {
    const { nodeId, finishedTtlMs, keys } = this.#ctx;
    const r = await this.#run(sessionId, SCRIPTS.recordEnd,
      [toWire(turnId), String(epoch), nodeId, status, reason ?? '', reportJson ?? '', String(finishedTtlMs), keys.channelPrefix]);
    return r[0] === 'ok';
  }

  /** `reap_lease`: the sweep's re-check of one lease the index says has passed. */
  async reap(sessionId: string, turnId: string): Promise<ReapReply> {
    const { finishedTtlMs, keys } = this.#ctx;
    const r = await this.#run(sessionId, SCRIPTS.reapLease, [toWire(turnId), String(finishedTtlMs), keys.channelPrefix]);
    if (r[0] === 'alive') return { kind: 'alive', leaseUntil: r[1]! };
    return r[0] === 'interrupted' ? { kind: 'interrupted' } : { kind: 'gone' };
  }

  /** `read_latest`: the session's latest turn, or null. */
  async latest(sessionId: string): Promise<FleetTurn | null> {
    const raw = await runScript(this.#ctx.redis, SCRIPTS.readLatest, this.#ctx.keys.session(sessionId), [], this.#ctx.commandTimeoutMs);
    if (typeof raw !== 'string') return null;
    const r = JSON.parse(raw) as FleetTurn;
    return {
      sessionId: fromWire(r.sessionId), turnId: fromWire(r.turnId), epoch: r.epoch, node: r.node, status: r.status,
      stopRequested: r.stopRequested === true, reason: r.reason, requester: r.requester, leaseUntil: r.leaseUntil,
    };
  }

  /** Index writes (a hint for the sweep, never awaited for a decision): `[score, member]` pairs. */
  index(pairs: Array<[deadline: string, sessionId: string, turnId: string]>): Promise<unknown> {
    const args = pairs.flatMap(([score, s, t]) => [score, leaseMember(s, t)]);
    return command(this.#ctx.redis, this.#ctx.keys.leases, ['ZADD', this.#ctx.keys.leases, ...args], this.#ctx.commandTimeoutMs);
  }

  /** Drop one turn from the lease index. */
  unindex(sessionId: string, turnId: string): Promise<unknown> {
    return command(this.#ctx.redis, this.#ctx.keys.leases, ['ZREM', this.#ctx.keys.leases, leaseMember(sessionId, turnId)], this.#ctx.commandTimeoutMs);
  }
}
