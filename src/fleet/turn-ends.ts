/**
 * The owner's last write of a turn: its terminal status (and StopReport) in the record, which
 * acknowledges every stop requester. The script refuses it once the lease has run out (the record
 * then says `interrupted`). A write Redis did not answer is retried every `renewMs` while the lease
 * lasts (by this process's clock, `confirmedUntil`); after that, or once the fleet closes, the turn
 * is let go without it: the sweep marks it `interrupted`. Once the write is recorded, the turn id's
 * claim is kept `finishedTtlMs` (turn-claims.ts, rule 4).
 */
import type { StopReport } from '../turn/report.js';
import type { FleetRedisClient } from './client.js';
import type { OwnedTurn } from './leases.js';
import type { TurnRecords } from './records.js';
import type { TurnClaims } from './turn-claims.js';
import { reportToJson } from './report-wire.js';

export interface TurnEndsContext {
  redis: FleetRedisClient;
  renewMs: number;
  records: TurnRecords;
  claims: TurnClaims;
  /** Lets go of the turn (its write done or given up). */
  release(owned: OwnedTurn): void;
  /** True once the fleet is closing: a failed write is then given up at once. */
  closed(): boolean;
}

export class TurnEnds {
  readonly #ctx: TurnEndsContext;
  /** Terminal writes that failed and are retried until their lease ends. */
  readonly #retries = new Set<NodeJS.Timeout>();

  constructor(ctx: TurnEndsContext) {
    this.#ctx = ctx;
  }

  /** Pending retries (each one live timer), for leak checks. */
  get size(): number { return this.#retries.size; }

  /** Record the turn's terminal status; resolves after the first attempt (retries go on by timer). */
  async record(owned: OwnedTurn, status: string, reason: string | undefined, report: StopReport | undefined): Promise<void> {
    owned.ending = true;
    const { redis, renewMs, records, claims, release, closed } = this.#ctx;
    const reportJson = report === undefined ? undefined : reportToJson(report);
    const attempt = async (): Promise<boolean> => {
      if (!redis.isReady) return false;
      try {
        await records.recordEnd(owned.sessionId, owned.turnId, owned.epoch!, status, reason, reportJson);
      } catch {
        return false;
      }
      records.unindex(owned.sessionId, owned.turnId).catch(() => {});
      // Not awaited, as the index write: unanswered, the claim expires with the lease no longer renewed.
      claims.finish(owned.turnId, owned.sessionId).catch(() => {});
      return true;
    };
    const retry = () => {
      if (closed() || performance.now() >= owned.confirmedUntil) return release(owned);
      const timer = setTimeout(() => {
        this.#retries.delete(timer);
        void attempt().then((done) => (done ? release(owned) : retry()));
      }, renewMs);
      this.#retries.add(timer);
    };
    if (await attempt()) release(owned);
    else retry();
  }

  /** Drop the pending retries (the fleet is closing). */
  close(): void {
    for (const timer of this.#retries) clearTimeout(timer);
    this.#retries.clear();
  }
}
