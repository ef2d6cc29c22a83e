/**
 * The sweep: every `sweepMs`, any instance reaps leases that have passed — whoever owned them —
 * so a dead owner's turn becomes `interrupted` within `leaseMs + sweepMs`.
 *
 * It reads the lease index (a hint: members whose indexed deadline has passed, by Redis's clock)
 * and asks `reap_lease` about each, which re-checks the turn's own record: a renewed lease answers
 * `alive` with its real deadline (re-indexed), a finished or vanished turn `gone` (dropped from the
 * index). The work is O(expired leases), in batches of `SWEEP_BATCH`.
 */
import { command, type FleetRedisClient } from './client.js';
import { type FleetKeys, parseLeaseMember } from './keys.js';
import { runScript, SCRIPTS } from './scripts.js';

const SWEEP_BATCH = 100;

export interface SweepContext {
  redis: FleetRedisClient; keys: FleetKeys; sweepMs: number; finishedTtlMs: number; commandTimeoutMs: number;
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
    const { redis, keys, finishedTtlMs, commandTimeoutMs: timeout } = this.#ctx;
    if (!redis.isReady) return 0;
    const [sec, usec] = await command(redis, ['TIME'], timeout) as [string, string];
    const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const members = await command(redis,
      ['ZRANGEBYSCORE', keys.leases, '-inf', String(now), 'LIMIT', '0', String(SWEEP_BATCH)], timeout) as string[];
    const drop: string[] = [];
    const again: string[] = [];
    let interrupted = 0;
    await Promise.all(members.map(async (member) => {
      const turn = parseLeaseMember(member);
      if (turn === undefined) return void drop.push(member);
      const [sessionId, turnId] = turn;
      const reply = await runScript(redis, SCRIPTS.reapLease, [keys.turns(sessionId), keys.finished(sessionId)],
        [turnId, String(finishedTtlMs), keys.channelPrefix], timeout) as string[];
      if (reply[0] === 'alive') again.push(reply[1]!, member);
      else drop.push(member);
      if (reply[0] === 'interrupted') interrupted++;
    }));
    if (drop.length > 0) await command(redis, ['ZREM', keys.leases, ...drop], timeout);
    if (again.length > 0) await command(redis, ['ZADD', keys.leases, ...again], timeout);
    return interrupted;
  }

  /** Live timers (the sweep interval). */
  get timers(): number { return Number(this.#timer !== undefined); }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
