/**
 * Turn-id claims: a turn id is used once fleet-wide, not only once in its session. A session's
 * scripts (scripts.ts) see that session's keys only, so a turn id running in another session
 * passes them; a client that learnt another user's turn id could run it in its own session and,
 * with a stop in the same step, end the other user's turn through a shared history (issue 49).
 * So `fleet.run` first claims the turn id itself, in a key of its own hash tag (one slot on Redis
 * Cluster: a script call of its own, before the session's `register`).
 *
 * Rules:
 * 1. A claim is a hash `turnClaim(turnId)`: `session` (the wire id of the session whose turn it is)
 *    and `holder` (the node and a value new at each `fleet.run`: who created it).
 * 2. The claim refuses other sessions only. Runs of the claim's own session share it and their
 *    session's `register` decides between them, as before claims (a used id answers `exists`,
 *    another live turn `busy`): so a claim is renewed, finished or kept by any run of its session,
 *    and its TTL is only ever extended by a take, never shortened.
 * 3. Taken before the registration, with the lease's TTL (`leaseMs`); renewed with the lease (the
 *    same round, `Leases.renew`), so it lives as long as its owner proves it is alive. An owner
 *    whose renewal finds the claim another session's has lost it: its turn is fenced as a lost lease.
 * 4. At the turn's end (its terminal write recorded) the claim is kept `finishedTtlMs`, as long as
 *    the turn's record answers `already_finished`: within that time the id is refused in any other
 *    session. A run refused before its turn began (session busy, id used in its session, Redis out
 *    of reach) drops the claim if it created it (`holder`). The race this leaves: a run of the same
 *    session that shared that claim and won its registration meanwhile holds no claim until its
 *    next renewal takes it again (rule 3 fences it if another session took the id in between).
 *    A dead owner's claim expires with its lease.
 */
import { randomUUID } from 'node:crypto';
import type { FleetRedisClient } from './client.js';
import type { FleetKeys } from './keys.js';
import { runScript, script } from './scripts.js';
import { toWire } from './wire-id.js';

/** claim_turn_id: take (or share, or renew) the claim of its session. ARGV session, holder, ttlMs. → 'ok' | 'taken' */
const CLAIM = String.raw`
local session = redis.call('HGET', KEYS[1], 'session')
if not session then
  redis.call('HSET', KEYS[1], 'session', ARGV[1], 'holder', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 'ok'
end
if session ~= ARGV[1] then return 'taken' end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 'ok'
`;

/** finish_turn_id: the turn ended: keep its session's claim ttlMs more. ARGV session, ttlMs. → 'ok' | 'gone' */
const FINISH = String.raw`
if redis.call('HGET', KEYS[1], 'session') ~= ARGV[1] then return 'gone' end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 'ok'
`;

/** drop_turn_id: the turn never began: give the id back if this run created the claim. ARGV holder. → 'ok' | 'gone' */
const DROP = String.raw`
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 'gone' end
redis.call('DEL', KEYS[1])
return 'ok'
`;

const SCRIPTS = { claim: script('claim_turn_id', CLAIM), finish: script('finish_turn_id', FINISH), drop: script('drop_turn_id', DROP) } as const;

export interface TurnClaimsContext {
  redis: FleetRedisClient; keys: FleetKeys; nodeId: string; leaseMs: number; finishedTtlMs: number; commandTimeoutMs: number;
}

/** A value new at each `fleet.run`: its name as the creator of a claim (rule 1). */
export function newHolder(nodeId: string): string {
  return `${nodeId} ${randomUUID()}`;
}

export class TurnClaims {
  readonly #ctx: TurnClaimsContext;

  constructor(ctx: TurnClaimsContext) {
    this.#ctx = ctx;
  }

  #run(turnId: string, s: (typeof SCRIPTS)[keyof typeof SCRIPTS], args: string[], ms = this.#ctx.commandTimeoutMs): Promise<unknown> {
    return runScript(this.#ctx.redis, s, [this.#ctx.keys.turnClaim(turnId)], args, ms);
  }

  /** Takes, shares or renews the claim with the lease's TTL (rules 2, 3): false when another session holds it. */
  async take(turnId: string, sessionId: string, holder: string, ms?: number): Promise<boolean> {
    return (await this.#run(turnId, SCRIPTS.claim, [toWire(sessionId), holder, String(Math.ceil(this.#ctx.leaseMs))], ms)) === 'ok';
  }

  /** The turn ended: its claim is kept `finishedTtlMs` (rule 4). */
  async finish(turnId: string, sessionId: string): Promise<void> {
    await this.#run(turnId, SCRIPTS.finish, [toWire(sessionId), String(this.#ctx.finishedTtlMs)]);
  }

  /** The turn never began: the claim is dropped if this run created it (rule 4). */
  async drop(turnId: string, holder: string): Promise<void> {
    await this.#run(turnId, SCRIPTS.drop, [holder]);
  }
}
