/**
 * `LedgerStore`: what a `TurnRunner` needs of a history, and the promises a store keeps. The file
 * `Ledger` and `fullstop/postgres`'s `PgLedger` implement it; a user's own store (MySQL, SQLite, …)
 * implements it too (docs/ledger.md shows how). The runner keeps the stop order on top of these
 * promises: it appends `cancelling` and awaits `flush(turnId)` before the signal, and appends the
 * aborted outputs, the marker and `cancelled` and awaits `flush(turnId)` before `turn_aborted`.
 *
 * Promises a store keeps (each is what the runner's own guarantees rest on):
 * 1. Order: entries are kept in the order `append` was called on one store, and `seq` says that
 *    order (a store shared by instances: within each session, in commit order; `seq` unique).
 * 2. Durability: `flush()` resolves only once every entry appended before the call is durable and
 *    visible to every reader of the store (fsynced, committed).
 * 3. A turn id is used once: an append of `turn_started` for a turn id the store already holds
 *    rejects with `TurnIdUsedError`, whoever sent the first.
 * 4. Nothing after the end: an append for a turn whose terminal status is recorded rejects
 *    (`TurnEndedError`); after `close()`, with `LedgerClosedError`.
 * 5. No hang: every append, flush and close settles within the store's own bound, even when what
 *    is behind it (a disk, a database) stops answering.
 * 6. Close: `close()` waits (bounded) for the stops under way to write and flush their history,
 *    then refuses later appends.
 * 7. Paging: `entries` returns entries in `seq` order, narrowed by every given field of the
 *    filter (`afterSeq`, `limit` included), and refuses a bad one with a TypeError/RangeError
 *    naming the field.
 */

import type { LedgerEntry, LedgerEntryInput } from './entry.js';

/** Narrows `entries()`; every given field must match. */
export interface LedgerFilter {
  /** Only this session's entries. */
  sessionId?: string;
  /** Only this turn's entries. */
  turnId?: string;
  /** Only entries whose `seq` is greater (paging: pass the last `seq` of the previous page). */
  afterSeq?: number;
  /** At most this many entries (the first ones, in `seq` order): a positive integer (0 is a RangeError). */
  limit?: number;
}

/**
 * The history a `TurnRunner` writes to (`new TurnRunner({ ledger })`). See the module header for
 * the promises every implementation keeps.
 *
 * @example
 * const runner = new TurnRunner({ ledger: await Ledger.open('history.jsonl') });   // a file
 * const shared = new TurnRunner({ ledger: await PgLedger.open({ pool }) });        // PostgreSQL
 */
export interface LedgerStore {
  /**
   * Appends one entry (the store assigns `seq` and `at`). Resolves once the entry is accepted in
   * order (not yet durable: see `flush`). Rejects with a TypeError for a bad entry (nothing kept),
   * `TurnIdUsedError` for a used turn id's `turn_started`, `TurnEndedError` for an ended turn,
   * `LedgerClosedError` for a closed store, and an Error for a store that failed.
   */
  append(entry: LedgerEntryInput): Promise<void>;
  /**
   * Resolves once every entry appended before the call is durable and visible to every reader.
   * With `turnId` (the runner's stop passes its turn), a store may wait for that turn's entries
   * only; one that ignores it waits for every entry, which keeps the promise too.
   */
  flush(turnId?: string): Promise<void>;
  /** The stored entries in `seq` order, narrowed by `filter`. */
  entries(filter?: LedgerFilter): Promise<LedgerEntry[]>;
  /**
   * True when this store knows `turnId` is used. A hint checked before a turn starts, so it may
   * miss a turn another instance started a moment ago: the `turn_started` append is the authority.
   */
  hasTurn(turnId: string): boolean;
  /**
   * Waits (bounded) for the stops under way to be written and flushed, taking only their appends
   * meanwhile, then closes (promise 6).
   */
  close(): Promise<void>;
  /**
   * How long a stop's signal waits for its intent (`cancelling`) to be durable, in ms; past it the
   * stop signals anyway and its report's `ledgerError` says the intent was not confirmed.
   * `undefined`: the signal waits for the flush however long it takes (for a store whose flush is
   * bounded on its own). Both shipped stores set it: the file `Ledger` to its `intentTimeoutMs`
   * option (default 5,000, `DEFAULT_LEDGER_INTENT_TIMEOUT_MS`), `PgLedger` to its own.
   */
  readonly intentTimeoutMs?: number;
  /** Where the history lives, for messages (a path, `postgres schema "fullstop"`). */
  readonly description?: string;
  /**
   * Closes the history of a turn whose owner died (a fleet's sweep calls it on the instance that
   * found the lease expired): a `tool_aborted` for each call without an output, then `status:
   * interrupted` with `reason` (`cancelled` with the stop's own reason where `cancelling` was
   * recorded). Resolves true when it closed the turn, false when the turn was unknown or already
   * ended. Optional: a store one instance owns (the file `Ledger`) repairs its turns at its next
   * open instead.
   *
   * @param reason The reason of the `interrupted` status (a fleet's sweep passes
   *   `FleetReasons.leaseExpired`, as its turn record says). @default FleetReasons.restart ('restart')
   */
  closeAbandonedTurn?(sessionId: string, turnId: string, reason?: string): Promise<boolean>;
}

const METHODS = ['append', 'flush', 'entries', 'hasTurn', 'close'] as const;

/** True when `value` has every method a `LedgerStore` must have (a structural check, once). */
export function isLedgerStore(value: unknown): value is LedgerStore {
  if (value === null || typeof value !== 'object') return false;
  return METHODS.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');
}

/** The store's `description`, else a generic name (for messages). */
export function describeStore(store: LedgerStore): string {
  return typeof store.description === 'string' ? store.description : 'the ledger store';
}
