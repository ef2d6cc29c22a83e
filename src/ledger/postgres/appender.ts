/**
 * One appending transaction: a call of `append_entries` (statements.ts) with a batch of rendered
 * rows, re-sent while its time lasts when its answer was lost. Each row carries `(writer,
 * local_seq)`, a key no other append of any instance has (`writer` is new at every open), so the
 * function skips a row a lost first attempt already wrote: an entry is written at most once
 * however often it is sent.
 *
 * Invariants:
 * 1. Every call carries the time it has left to the server (`p_lock_ms`, a little less than the
 *    client's own bound): a lock wait there ends before the client gives up, so a call the
 *    caller was told failed never commits later (but for a commit whose answer was lost).
 * 2. A call whose answer was lost (`inDoubt`) is sent again while its time lasts; a first attempt
 *    still running on the server holds its sessions' locks, so the re-send finds them `busy`
 *    instead of writing beside it.
 */

import { LedgerTimeoutError } from '../../errors.js';
import { idColumn } from './id-column.js';
import { PgCallError, withClient, type PgPool } from './pool.js';
import { joinAsJson, joinBodies, joinNumbers, joinTexts, type Statements } from './statements.js';

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
  /** The entry as JSON, without `seq` (`JSON.stringify` output: no raw newline, as `joinBodies` needs). */
  body: string;
  /** UTF-8 bytes of the row (its body and ids): what the queue and a batch are bounded by. */
  bytes: number;
  /** Set once an attempt that carried it lost its answer: it may be written (the function then checks). */
  maybeWritten?: boolean;
}

/** What `append_entries` said of one row (statements.ts invariant 3). */
export type Verdict = 'ok' | 'used' | 'ended' | 'session' | 'owner' | 'stale' | 'busy';

/** A turn state a repair expects (`append_entries` writes nothing unless it still holds). */
export interface Expected { turnId: string; lastSeq: string }

/** The part of the time left the server's lock waits may use: the rest is the answer's way back. */
function serverBound(leftMs: number): number {
  return Math.max(1, Math.floor(leftMs - Math.min(250, leftMs / 5)));
}

/**
 * `append`'s `$4`–`$7` (session ids, turn ids, types, statuses) and `$14`: newline-joined, or all
 * four as JSON arrays (`$14` true) when a value holds a newline (statements.ts `joinTexts`).
 */
function textColumns(rows: readonly Row[]): { texts: string[]; json: boolean } {
  const columns = [rows.map((r) => idColumn(r.sessionId)), rows.map((r) => idColumn(r.turnId)), rows.map((r) => r.type), rows.map((r) => r.status)];
  const joined = columns.map(joinTexts);
  if (joined.every((text) => text !== undefined)) return { texts: joined as string[], json: false };
  return { texts: columns.map(joinAsJson), json: true };
}

export class Appender {
  readonly #pool: PgPool;
  readonly #statements: Statements;
  readonly #owner: string;
  readonly #writer: string;
  readonly #where: string;
  /** The prepared statement's name, or `undefined` (options.preparedStatements false). */
  readonly #name: string | undefined;
  /** Calls of `append_entries` sent (one transaction each), re-sends included. */
  transactions = 0;

  constructor(pool: PgPool, statements: Statements, owner: string, writer: string, where: string, prepared: boolean) {
    this.#pool = pool;
    this.#name = prepared ? statements.appendName : undefined;
    this.#statements = statements;
    this.#owner = owner;
    this.#writer = writer;
    this.#where = where;
  }

  /**
   * Sends `rows` in one transaction within `timeoutMs`; one verdict a row. A failure whose answer
   * was lost (`inDoubt`) is sent again while time is left (invariant 2). Rejects with a
   * `PgCallError`: `inDoubt` when some attempt may have committed, `before` when none did.
   */
  async send(rows: readonly Row[], timeoutMs: number, expect?: Expected): Promise<Verdict[]> {
    const deadline = performance.now() + timeoutMs;
    const { texts, json } = textColumns(rows);
    // values[11] (the server's lock bound) and values[12] (resent) change between attempts.
    const values = [
      idColumn(this.#owner), this.#writer, joinNumbers(rows.map((r) => r.localSeq)), ...texts, joinNumbers(rows.map((r) => r.at)),
      joinBodies(rows.map((r) => r.body)), expect === undefined ? null : idColumn(expect.turnId), expect?.lastSeq ?? null, 0,
      rows.some((r) => r.maybeWritten === true), json,
    ];
    let lost: PgCallError | undefined;
    for (;;) {
      const left = deadline - performance.now();
      try {
        if (left <= 0) {
          const late = new LedgerTimeoutError(`${this.#where}: out of time (timeoutMs) before the transaction could be sent again`);
          throw new PgCallError(late.message, 'before', late);
        }
        const result = await withClient(this.#pool, this.#where, Math.ceil(left), async (query) => {
          this.transactions++;
          values[11] = serverBound(deadline - performance.now());
          return query(this.#statements.append, values, this.#name);
        });
        const verdicts = result[0].verdicts as Verdict[] | null;
        return verdicts ?? rows.map(() => 'ok');
      } catch (error) {
        if (!(error instanceof PgCallError)) throw error;
        if (error.kind === 'inDoubt') {
          lost = error;
          for (const row of rows) row.maybeWritten = true;
          values[12] = true;
        }
        if (error.kind !== 'inDoubt' || deadline - performance.now() <= 0) throw lost ?? error;
      }
    }
  }
}

/**
 * True for a server's refusal that a smaller batch may not meet (a row the database cannot take,
 * a statement or lock timeout, a lack of memory): the batch is sent again in halves, so only the
 * row that fails fails. A refusal of everything (the schema dropped, no privilege) is not.
 */
export function splittable(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' && /^(22|23|40|53|54|55P03|57014)/.test(code);
}
