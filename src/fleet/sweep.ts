/**
 * The sweep: every `sweepMs`, any instance reaps leases that have passed — whoever owned them —
 * so a dead owner's turn becomes `interrupted` within `leaseMs + sweepMs`.
 *
 * It reads the lease index (a hint: members whose indexed deadline has passed, by Redis's clock)
 * and asks `reap_lease` about each, which re-checks the turn's own record: a renewed lease answers
 * `alive` with its real deadline (re-indexed), a finished or vanished turn `gone` (dropped from the
 * index). The work is O(expired leases), in batches of `SWEEP_BATCH`.
 *
 * A turn it marks `interrupted` had a dead (or cut-off) owner, whose history nobody else will
 * close: the sweeping instance closes it in the shared store (`runner.ledger.closeAbandonedTurn`,
 * when the store has it, with the record's reason `lease.expired`), once per turn fleet-wide. A
 * store that fails is reported (a process warning), never a reason to stop sweeping.
 */
import { SWEEP_LEDGER_WARNING } from '../constants.js';
import { messageOf } from '../base/render.js';
import { FleetReasons } from '../constants.js';
import { command, type FleetRedisClient } from './client.js';
import { type FleetKeys, parseLeaseMember } from './keys.js';
import type { TurnRecords } from './records.js';
import type { TurnRunner } from '../turn/runner.js';

const SWEEP_BATCH = 100;

export interface SweepContext {
  redis: FleetRedisClient; keys: FleetKeys; records: TurnRecords; runner: TurnRunner; sweepMs: number; commandTimeoutMs: number;
}

export class Sweep {
  readonly #ctx: SweepContext;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(ctx: SweepContext) {
    this.#ctx = ctx;
    this.#timer = setInterval(() => void this.run().catch(() => { /* Redis away: next time */ }), ctx.sweepMs);
  }

  /** One sweep (joins one under way). Resolves with the number of turns it marked `interrupted`. */
  run(): Promise<number> {
    this.#running ??= this.#sweep().finally(() => { this.#running = undefined; });
    return this.#running;
  }

  async #sweep(): Promise<number> {
    const { redis, keys, records, commandTimeoutMs: timeout } = this.#ctx;
    if (!redis.isReady) return 0;
    // Redis's clock (on a cluster, the index's shard's); reap_lease re-checks each turn by its own shard's.
    const [sec, usec] = await command(redis, keys.leases, ['TIME'], timeout) as [string, string];
    const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const members = await command(redis, keys.leases,
      ['ZRANGEBYSCORE', keys.leases, '-inf', String(now), 'LIMIT', '0', String(SWEEP_BATCH)], timeout) as string[];
    const drop: string[] = [];
    const again: string[] = [];
    let interrupted = 0;
    await Promise.all(members.map(async (member) => {
      const turn = parseLeaseMember(member);
      if (turn === undefined) return void drop.push(member);
      const [sessionId, turnId] = turn;
      const reply = await records.reap(sessionId, turnId);
      if (reply.kind === 'alive') again.push(reply.leaseUntil, member);
      else drop.push(member);
      if (reply.kind === 'interrupted') {
        interrupted++;
        await this.#closeHistory(sessionId, turnId);
      }
    }));
    if (drop.length > 0) await command(redis, keys.leases, ['ZREM', keys.leases, ...drop], timeout);
    if (again.length > 0) await command(redis, keys.leases, ['ZADD', keys.leases, ...again], timeout);
    return interrupted;
  }

  /** The dead owner's turn's history, closed in the shared store; a failure is a warning, never thrown. */
  async #closeHistory(sessionId: string, turnId: string): Promise<void> {
    const ledger = this.#ctx.runner.ledger;
    if (typeof ledger?.closeAbandonedTurn !== 'function') return;
    try {
      // The history says why the turn ended as its record does (reap_lease's reason).
      await ledger.closeAbandonedTurn(sessionId, turnId, FleetReasons.leaseExpired);
    } catch (error) {
      process.emitWarning(`fullstop/fleet: closing the history of turn ${JSON.stringify(turnId)} (session ${JSON.stringify(sessionId)}), whose owner's lease expired, failed: ${messageOf(error)}`,
        { type: SWEEP_LEDGER_WARNING, detail: error instanceof Error ? error.stack : undefined });
    }
  }

  /** Live timers (the sweep interval). */
  get timers(): number { return Number(this.#timer !== undefined); }

  /**
   * No more sweeps by timer; resolves once a sweep under way has ended, its `closeAbandonedTurn`
   * calls included (the store's own bound applies), so a store closed after the fleet is not
   * closed under a dead owner's history (which no other instance would close: once fleet-wide).
   */
  close(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    return this.#running === undefined ? Promise.resolve() : this.#running.then(() => {}, () => {});
  }
}
