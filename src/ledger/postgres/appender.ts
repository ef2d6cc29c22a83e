/**
 * One appending transaction: a call of `append_entries` (statements.ts) with a batch of rendered
 * rows, re-sent when its answer was lost. Each row carries `(writer, local_seq)`, a key no other
 * append of any instance has (`writer` is new at every open), so the function skips a row a lost
 * first attempt already wrote: an entry is written at most once however often it is sent.
 */

import { LedgerTimeoutError } from '../../errors.js';
import { idColumn } from './id-column.js';
import { PgCallError, withClient, type PgPool } from './pool.js';
import type { Statements } from './statements.js';

/** One entry on its way to the database. */
export interface Row {
  /** This writer's number for the row: the order `append` was called in, and half its idempotency key. */
  localSeq: number;
  sessionId: string;
  turnId: string;
  type: string;
  /** A status entry's status; `null` for other types. */
  status: string | null;
  at: number;
  /** The entry as JSON, without `seq`. */
  body: string;
}

/** What `append_entries` said of one row. */
export type Verdict = 'ok' | 'used' | 'ended' | 'stale';

/** A turn state a repair expects (`append_entries` writes nothing unless it still holds). */
export interface Expected { turnId: string; lastSeq: string }

/** How many times a batch whose answer was lost is sent in all, within its time. */
const ATTEMPTS = 3;

export class Appender {
  readonly #pool: PgPool;
  readonly #statements: Statements;
  readonly #owner: string;
  readonly #writer: string;
  readonly #where: string;
  /** Calls of `append_entries` sent (one transaction each), re-sends included. */
  transactions = 0;

  constructor(pool: PgPool, statements: Statements, owner: string, writer: string, where: string) {
    this.#pool = pool;
    this.#statements = statements;
    this.#owner = owner;
    this.#writer = writer;
    this.#where = where;
  }

  /**
   * Sends `rows` in one transaction within `timeoutMs`; one verdict a row. A failure whose answer
   * was lost (`inDoubt`) is sent again while time is left (the re-send writes what the first did
   * not, and nothing twice). Rejects with a `PgCallError`: `inDoubt` when some attempt may have
   * committed, `before` when none did.
   */
  async send(rows: readonly Row[], timeoutMs: number, expect?: Expected): Promise<Verdict[]> {
    const deadline = performance.now() + timeoutMs;
    const values = [
      idColumn(this.#owner), this.#writer, rows.map((r) => r.localSeq), rows.map((r) => idColumn(r.sessionId)),
      rows.map((r) => idColumn(r.turnId)), rows.map((r) => r.type), rows.map((r) => r.status), rows.map((r) => r.at),
      rows.map((r) => r.body), expect === undefined ? null : idColumn(expect.turnId), expect?.lastSeq ?? null,
    ];
    let lost: PgCallError | undefined;
    for (let attempt = 1; ; attempt++) {
      const left = deadline - performance.now();
      try {
        if (left <= 0) {
          const late = new LedgerTimeoutError(`${this.#where}: out of time (timeoutMs) before the transaction could be sent again`);
          throw new PgCallError(late.message, 'before', late);
        }
        const result = await withClient(this.#pool, this.#where, Math.ceil(left), async (query) => {
          this.transactions++;
          return query(this.#statements.append, values);
        });
        return result[0].verdicts as Verdict[];
      } catch (error) {
        if (!(error instanceof PgCallError)) throw error;
        if (error.kind === 'inDoubt') lost = error;
        if (error.kind !== 'inDoubt' || attempt >= ATTEMPTS || deadline - performance.now() <= 0) throw lost ?? error;
      }
    }
  }
}
