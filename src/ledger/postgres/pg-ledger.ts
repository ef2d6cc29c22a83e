/**
 * `PgLedger`: the `LedgerStore` on PostgreSQL that every instance of a fleet shares. The schema
 * and the one writing decision are in statements.ts, group commit in group-commit.ts, the bounded
 * use of the caller's pool in pool.ts, the repair of a dead owner's turn in repair.ts.
 *
 * Invariants:
 * 1. `append` checks and renders the entry at the call (the file ledger's `renderEntry`, and the
 *    sizes PostgreSQL can take: rows.ts), and numbers it (`localSeq`) in call order; group commit
 *    keeps each session's order into the database, whose `seq` is commit order within a session
 *    (statements.ts).
 * 2. What the database decides stays there: a used turn id, an ended turn, a turn of another
 *    session or of another instance are refused inside the appending transaction, whichever
 *    instance sends it; `hasTurn` is only a local hint.
 * 5. A `turn_started` or a status (the stop's intent, a turn's end) resolves once committed; any
 *    other entry (`say`, a tool call, its output) once queued. A failure or refusal of such an
 *    entry, known later, rejects the next non-status append of its turn (`#late`), and the flushes.
 * 3. Every wait is bounded by `timeoutMs` (pool.ts, group-commit.ts invariant 2).
 * 4. `close` waits (at most `closeWaitMs`) for the stops under way — turns whose `cancelling` was
 *    appended here and whose terminal status was not — taking only their appends meanwhile; then
 *    it refuses every append and waits for the ones under way (bounded by 3).
 */

import { randomUUID } from 'node:crypto';
import { FleetReasons } from '../../constants.js';
import { checkId, LedgerClosedError, TurnEndedError, TurnIdUsedError } from '../../errors.js';
import { checkFilter } from '../checks.js';
import { isTerminalStatus, type LedgerEntry, type LedgerEntryInput } from '../entry.js';
import type { LedgerFilter, LedgerStore } from '../store.js';
import { Appender, type Row, type Verdict } from './appender.js';
import { GroupCommit } from './group-commit.js';
import { idColumn } from './id-column.js';
import { migrate } from './migrations.js';
import { resolveOptions, type PgLedgerOptions, type ResolvedOptions } from './options.js';
import { reported, withClient } from './pool.js';
import { closeTurn, openTurnsOf, type RepairContext } from './repair.js';
import { checkIdBytes, entryOf, rowOf, turnOf, turnRowOf } from './rows.js';
import { statementsFor, type Statements } from './statements.js';
import { StopsUnderWay } from '../stops-under-way.js';
import { setPgLedgerHooks } from './pg-ledger-hooks.js';
import { setTurnAppends, type TurnAppend } from '../turn-append.js';

/**
 * The instance ids open in this process, by pool, as `JSON.stringify([schema, instanceId])`: a
 * second open of one of them would take the first's live turns for a crash's leftovers and close
 * them (restart repair), so it is refused. Across processes, or through two pools, nothing can tell:
 * the docs ask for one live process a name.
 */
const openInstances = new WeakMap<object, Set<string>>();

/**
 * The history on PostgreSQL, shared by every instance that opens the same schema: stops, answers
 * and the next prompt read the same entries wherever they run (docs/postgres.md).
 *
 * - Entries are the file `Ledger`'s objects (`{ seq, at, sessionId, turnId, type, ... }`); `seq` is
 *   unique, and increasing in commit order within a session.
 * - `append` of a `say`, a tool call or output resolves once queued (a streamed token costs no
 *   commit of its own); a `turn_started` or a status once committed; `flush` waits for every
 *   append before it. Concurrent appends share transactions. The queue is bounded
 *   (`MAX_QUEUED_ROWS`, `MAX_QUEUED_BYTES`): past it `append` waits.
 * - A `turn_started` of a turn id any instance used rejects with `TurnIdUsedError`, as does an
 *   entry of a turn of another session or another live instance; an append for a turn whose end
 *   is recorded rejects (the database refuses it in the same transaction).
 * - Every wait is bounded by `timeoutMs`; an entry whose commit answer was lost is re-sent and
 *   written at most once.
 * - `close()` waits (at most `closeWaitMs`) for the stops under way to commit their history, as the
 *   file `Ledger`'s does: `runner.shutdown({ deadlineMs })` then `ledger.close()` leaves every
 *   stopped turn complete for every instance.
 *
 * @example
 * import pg from 'pg';
 * import { TurnRunner } from 'fullstop';
 * import { PgLedger } from 'fullstop/postgres';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const ledger = await PgLedger.open({ pool, instanceId: process.env.POD_NAME });
 * const runner = new TurnRunner({ ledger });
 * // … on shutdown: await runner.shutdown({ deadlineMs: 10_000 }); await ledger.close(); await pool.end();
 */
export class PgLedger implements LedgerStore {
  /** The schema holding the tables. */
  readonly schema: string;
  /** This instance's name: the owner of the turns it starts. */
  readonly instanceId: string;
  /** The bound of every wait on the database, in ms. */
  readonly timeoutMs: number;
  /** How long a stop's signal waits for its intent's commit, in ms (`LedgerStore`). */
  readonly intentTimeoutMs: number;
  /** How long `close()` waits for the stops under way to commit their history, in ms. */
  readonly closeWaitMs: number;
  readonly #options: ResolvedOptions;
  readonly #statements: Statements;
  readonly #appender: Appender;
  readonly #commits: GroupCommit;
  /** Turn ids this instance appended: the local hint of `hasTurn` (invariant 2). */
  readonly #turnIds = new Set<string>();
  /** The last local seq given to a row of this writer. */
  #localSeq = 0;
  /** What befell an entry of the turn after its append resolved (invariant 5): its next non-status append rejects with it. */
  readonly #late = new Map<string, Error>();
  /** The turns whose `cancelling` was appended and whose terminal status was not: `close` waits for them (invariant 4). */
  readonly #stopping = new StopsUnderWay();
  /** `close()`'s promise; `undefined` while open. */
  #closing: Promise<void> | undefined;
  /** Set once `close` stopped waiting for stops: every append is refused. */
  #closed = false;
  /** Gives this instance id back (`openInstances`), once `close` has ended. */
  readonly #release: () => void;

  private constructor(options: ResolvedOptions, statements: Statements, release: () => void) {
    this.#options = options;
    this.#release = release;
    this.schema = options.schema;
    this.instanceId = options.instanceId;
    this.timeoutMs = options.timeoutMs;
    this.intentTimeoutMs = options.intentTimeoutMs;
    this.closeWaitMs = options.closeWaitMs;
    this.#statements = statements;
    // A writer name new at every open: (writer, local_seq) names a row for re-sends (appender.ts).
    this.#appender = new Appender(options.pool, statements, options.instanceId, randomUUID(), 'PgLedger.append', options.preparedStatements);
    this.#commits = new GroupCommit(this.#appender, options.timeoutMs, 'PgLedger.append', (row, verdict) => this.#refusal(row, verdict),
      (row, error) => { if (!this.#late.has(row.turnId)) this.#late.set(row.turnId, error instanceof Error ? error : new Error(String(error))); });
    const appender = this.#appender;
    setPgLedgerHooks(this, { get transactions() { return appender.transactions; } });
    setTurnAppends(this, (sessionId, turnId) => this.#turnAppend(sessionId, turnId));
  }

  /**
   * Creates the schema's tables when missing (safe when instances open at once), then closes the
   * unfinished turns this `instanceId` started before (a restart: see `closeAbandonedTurn`).
   * Rejects with a TypeError/RangeError naming a bad option, with an Error naming the `instanceId`
   * while a `PgLedger` of the same pool, schema and `instanceId` is open in this process (its live
   * turns would be closed as a restart's), and with an Error when the database cannot be reached
   * or refuses, within `timeoutMs` for each step.
   */
  static async open(options: PgLedgerOptions): Promise<PgLedger> {
    const resolved = resolveOptions(options);
    checkIdBytes('PgLedger.open: options.instanceId', resolved.instanceId);
    const statements = statementsFor(resolved.schema);
    const release = claimInstance(resolved);
    try {
      await migrate(resolved.pool, statements, resolved.timeoutMs);
      const ledger = new PgLedger(resolved, statements, release);
      for (const { sessionId, turnId } of await openTurnsOf(ledger.#repair, 'PgLedger.open', resolved.instanceId)) {
        await closeTurn(ledger.#repair, 'PgLedger.open', sessionId, turnId, FleetReasons.restart);
      }
      return ledger;
    } catch (error) {
      release();
      throw reported(error);
    }
  }

  /** `postgres schema "<schema>"`, for messages (`LedgerStore.description`). */
  get description(): string { return `postgres schema "${this.schema}"`; }

  /** True when this instance appended an entry of `turnId`: a local hint (another instance's turns are not known here). */
  hasTurn(turnId: string): boolean {
    checkId('PgLedger.hasTurn: turnId', turnId);
    return this.#turnIds.has(turnId);
  }

  /**
   * Appends one entry. A `turn_started` or a status resolves once committed; any other entry once
   * queued (`flush` waits for its commit), after waiting for room while the queue is full. Rejects
   * with a TypeError naming the field for a bad entry and a RangeError for one PostgreSQL cannot
   * hold (an id over `MAX_PG_ID_BYTES`, an entry over `LEDGER_MAX_LINE_BYTES`; nothing kept),
   * `TurnIdUsedError` for a `turn_started` of a used turn id or an entry of a turn of another
   * session or another instance, and an Error for an ended turn, a closed ledger (while `close`
   * waits for the stops under way, only their turns' appends are taken), or a database that failed
   * or did not answer within `timeoutMs` (then it was not written, unless the answer of its commit
   * was the one lost). An entry queued earlier whose write failed or was refused rejects the next
   * non-status append of its turn with that error (nothing of the new one kept).
   */
  append(entry: LedgerEntryInput): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closedError());
    let row: Row;
    try {
      row = rowOf(entry, this.#localSeq + 1);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#queue(row);
  }

  /** `TurnAppends` (turn-append.ts): `append` for a runner's turn, its ids checked and encoded once. */
  #turnAppend(sessionId: string, turnId: string): TurnAppend {
    const turn = turnOf(sessionId, turnId);
    return (body) => {
      if (this.#closed) return Promise.reject(this.#closedError());
      let row: Row;
      try {
        row = turnRowOf(turn, body, this.#localSeq + 1);
      } catch (error) {
        return Promise.reject(error);
      }
      return this.#queue(row);
    };
  }

  /** Queues a checked row (`append`'s rules for a closing ledger, a late failure and durability). */
  #queue(row: Row): Promise<void> {
    if (this.#closing !== undefined && !this.#stopping.has(row.turnId)) return Promise.reject(this.#closedError());
    const durable = row.type === 'turn_started' || row.status !== null;
    if (!durable) {
      const late = this.#late.get(row.turnId);
      if (late !== undefined) {
        this.#late.delete(row.turnId);
        return Promise.reject(late);
      }
    } else if (isTerminalStatus(row.status)) {
      this.#late.delete(row.turnId);
    }
    this.#localSeq = row.localSeq;
    this.#turnIds.add(row.turnId);
    this.#stopping.note(row.turnId, row.status);
    const added = this.#commits.add(row, durable);
    // A refused intent is no stop under way: `close` does not wait for its end.
    if (row.status === 'cancelling') added.catch(() => this.#stopping.note(row.turnId, 'cancelled'));
    return added;
  }

  /**
   * Resolves once every entry appended before the call is committed; rejects if one failed to
   * commit, or was refused after its append resolved (a `say` of a turn another instance ended).
   * With `turnId`, waits for that turn's entries only (the runner's stop does: its intent never
   * waits for another session's big entry).
   */
  flush(turnId?: string): Promise<void> {
    if (turnId === undefined) return this.#commits.flush();
    checkId('PgLedger.flush: turnId', turnId);
    return this.#commits.flushTurn(turnId);
  }

  /**
   * Committed entries of every instance, in `seq` order: with `sessionId`, that session's only (an
   * index); with `turnId`, that turn's; `afterSeq` and `limit` page (pass the last `seq` seen).
   * A page across sessions (`afterSeq` or `limit` without `sessionId`/`turnId`) holds only entries
   * below the safe horizon (`seq` below every transaction still in progress), so paging never skips
   * an entry that commits later; an entry shows up there once every transaction older than it ended.
   * Waits first for this instance's appends under way. Throws a TypeError/RangeError naming a bad
   * filter field; rejects when the database fails or does not answer within `timeoutMs`.
   */
  async entries(filter?: LedgerFilter): Promise<LedgerEntry[]> {
    const checked = checkFilter(filter, 'PgLedger.entries');
    await this.#commits.flush().catch(() => {});
    const bySession = checked.sessionId !== undefined || checked.turnId !== undefined;
    const paging = checked.afterSeq !== undefined || checked.limit !== undefined;
    const { text, order } = this.#statements.selectEntries({
      sessionId: checked.sessionId !== undefined, turnId: checked.turnId !== undefined,
      afterSeq: checked.afterSeq !== undefined, limit: checked.limit !== undefined,
      // Across sessions `seq` is not commit order: a page reads only below the safe horizon (statements.ts invariant 2).
      horizon: paging && !bySession,
    });
    const values = order.map((field) => {
      const value = checked[field as keyof LedgerFilter];
      return field === 'sessionId' || field === 'turnId' ? idColumn(value as string) : value;
    });
    const rows = await this.#call('PgLedger.entries', (query) => query(text, values));
    return rows.map(entryOf);
  }

  /**
   * Closes the history of a turn whose owner died (a fleet's sweep calls it): a `tool_aborted` for
   * each call without an output, then `interrupted` with `reason` (the marker and `cancelled` with
   * the stop's own reason where `cancelling` was recorded), in one transaction that holds only
   * while the turn is open. Resolves true when it closed the turn, false when the turn is unknown,
   * of another session, or already ended. A TypeError/RangeError names a bad argument.
   *
   * @param reason The reason of the `interrupted` status. @default FleetReasons.restart ('restart')
   * @example
   * await ledger.closeAbandonedTurn('session-1', 'turn-7', FleetReasons.leaseExpired);
   */
  async closeAbandonedTurn(sessionId: string, turnId: string, reason: string = FleetReasons.restart): Promise<boolean> {
    checkId('PgLedger.closeAbandonedTurn: sessionId', sessionId);
    checkId('PgLedger.closeAbandonedTurn: turnId', turnId);
    checkId('PgLedger.closeAbandonedTurn: reason', reason);
    if (this.#closing !== undefined) throw new LedgerClosedError(`PgLedger.closeAbandonedTurn: the ledger (${this.description}) is closed`);
    try {
      return await closeTurn(this.#repair, 'PgLedger.closeAbandonedTurn', sessionId, turnId, reason);
    } catch (error) {
      throw reported(error);
    }
  }

  /**
   * Waits (at most `closeWaitMs`) for the stops under way — turns whose `cancelling` was appended
   * here and whose terminal status was not — to append their history (only their appends are taken
   * meanwhile), then refuses every append and waits (at most `timeoutMs`) for the appends under way
   * to commit. Resolves within `closeWaitMs + timeoutMs`; a commit that failed is its append's
   * rejection, not the close's. Calling it again returns the same promise. Never ends the pool.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** `close()`, for `await using ledger = await PgLedger.open(...)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    try {
      await this.#waitForStops();
      this.#closed = true;
      await this.#commits.flush().catch(() => {});
    } finally {
      this.#release();
    }
  }

  /** Resolves when no stop is under way, or after `closeWaitMs`. */
  #waitForStops(): Promise<void> {
    return this.#stopping.settled(this.closeWaitMs);
  }

  #closedError(): Error {
    return new LedgerClosedError(`PgLedger.append: the ledger (${this.description}) is closed`);
  }

  get #repair(): RepairContext {
    return {
      pool: this.#options.pool, statements: this.#statements, appender: this.#appender, timeoutMs: this.timeoutMs,
      nextLocalSeq: () => ++this.#localSeq,
    };
  }

  /** A read within `timeoutMs`, its timeout rejected as a `LedgerTimeoutError`. */
  async #call<T>(where: string, use: (query: (text: string, values?: unknown[]) => Promise<any[]>) => Promise<T>): Promise<T> {
    try {
      return await withClient(this.#options.pool, where, this.timeoutMs, use);
    } catch (error) {
      throw reported(error);
    }
  }

  /** The rejection of a row the database refused (invariant 2); `undefined` when it was written. */
  #refusal(row: Row, verdict: Verdict): Error | undefined {
    if (verdict === 'ok') return undefined;
    if (verdict === 'used') {
      return new TurnIdUsedError(`PgLedger.append: turn ${JSON.stringify(row.turnId)} is already in ${this.description}; a turn id is used once`, row.turnId);
    }
    if (verdict === 'session') {
      return new TurnIdUsedError(`PgLedger.append: turn ${JSON.stringify(row.turnId)} belongs to another session in ${this.description}, ` +
        `not ${JSON.stringify(row.sessionId)}; nothing of it was written`, row.turnId);
    }
    if (verdict === 'owner') {
      return new TurnIdUsedError(`PgLedger.append: turn ${JSON.stringify(row.turnId)} was started by another instance in ${this.description}, ` +
        `not ${JSON.stringify(this.instanceId)}; only its owner (or a repair) writes it, and nothing of it was written`, row.turnId);
    }
    if (verdict !== 'ended') return new Error(`PgLedger.append: the database did not write the entry of turn ${JSON.stringify(row.turnId)} (${verdict})`);
    return new TurnEndedError(`PgLedger.append: turn ${JSON.stringify(row.turnId)} has ended (its end is recorded in ${this.description}); nothing of a turn is written after its end`, row.turnId);
  }
}

/**
 * Takes `instanceId` in `schema` on `pool` for this process (`openInstances`), or throws naming it;
 * returns what gives it back (once).
 */
function claimInstance({ pool, schema, instanceId }: ResolvedOptions): () => void {
  const key = JSON.stringify([schema, instanceId]);
  let open = openInstances.get(pool);
  if (open === undefined) openInstances.set(pool, open = new Set());
  if (open.has(key)) {
    throw new Error(`PgLedger.open: instanceId ${JSON.stringify(instanceId)} is already open on this pool in postgres schema "${schema}"; ` +
      'close that PgLedger first or share it (a second open would close its live turns as a restart\'s leftovers)');
  }
  open.add(key);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    open.delete(key);
  };
}
