/**
 * `ShardedLedger`: a `LedgerStore` over several stores (several PostgreSQL databases, schemas, or
 * any `LedgerStore`s), each session's history in one of them, chosen by its session id
 * (sharded-route.ts). For a history past what one database holds (docs/postgres.md, "Past one
 * database").
 *
 * Invariants:
 * 1. Every entry of a session goes to its session's store (`storeOf`), and everything read by
 *    session id comes from it: a session's promises (order, durability, nothing after the end,
 *    the stop order) are that store's, unchanged.
 * 2. `flush` resolves once every store that took an append since its last successful flush has
 *    flushed (promise 2 holds for the whole: an untouched store has nothing unflushed from here).
 * 3. What has no session id to route by is refused or asked of every store: `entries()` without
 *    `sessionId` is refused (each store's `seq` is its own order: there is no one order across
 *    stores to page in); `hasTurn` asks every store (a local hint, as ever).
 * 4. A turn id is used once within its session's store only: two sessions in two stores can use
 *    one turn id (turn ids are client-given; use ids that are unique by construction, or a fleet,
 *    which refuses a turn id running in another session).
 * 5. `close` closes every store at once, each within its own bound; a store's own rejection (with
 *    its class and `code`) is what `flush` and `close` reject with, after every store settled.
 */

import { checkId, describe } from '../errors.js';
import { checkFilter } from './checks.js';
import type { LedgerEntry, LedgerEntryInput } from './entry.js';
import { routeOf } from './sharded-route.js';
import { describeStore, isLedgerStore, type LedgerFilter, type LedgerStore } from './store.js';

/** `new ShardedLedger(options)`. */
export interface ShardedLedgerOptions {
  /**
   * The stores, in a fixed order: a session's store is chosen from its id and the stores'
   * positions, so every instance must list the same stores in the same order. Appending a store
   * moves about 1/(n+1) of the sessions to it (their earlier history stays where it was); removing
   * or reordering moves more. Give each store to this ledger only (its `flush` is skipped while
   * this ledger has appended nothing to it). At least one; a store listed twice is refused.
   * @example
   * new ShardedLedger({ stores: [await PgLedger.open({ pool: poolA }), await PgLedger.open({ pool: poolB })] })
   */
  stores: readonly LedgerStore[];
}

/**
 * A history spread over several stores by session id: each session's entries in one store, its
 * promises that store's (see the module header for what changes across stores).
 *
 * @example
 * import pg from 'pg';
 * import { ShardedLedger, TurnRunner } from 'fullstop';
 * import { PgLedger } from 'fullstop/postgres';
 * const pools = [process.env.HISTORY_A_URL, process.env.HISTORY_B_URL].map((url) => new pg.Pool({ connectionString: url }));
 * const ledger = new ShardedLedger({ stores: await Promise.all(pools.map((pool) => PgLedger.open({ pool, instanceId: process.env.POD_NAME }))) });
 * const runner = new TurnRunner({ ledger });
 * const history = await ledger.entries({ sessionId: 'session-1' }); // from session-1's store only
 */
export class ShardedLedger implements LedgerStore {
  /** The stores, in the order given (frozen). */
  readonly stores: readonly LedgerStore[];
  /** The shortest `intentTimeoutMs` of the stores; undefined when none sets one (`LedgerStore`). */
  readonly intentTimeoutMs: number | undefined;
  /** Appends handed to each store (by position), and how many of them the last successful flush covered (invariant 2). */
  readonly #appended: number[];
  readonly #flushed: number[];

  constructor(options: ShardedLedgerOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError(`ShardedLedger: options: expected an object, got ${describe(options)}`);
    const { stores } = options;
    if (!Array.isArray(stores)) throw new TypeError(`ShardedLedger: options.stores: expected an array of LedgerStores, got ${describe(stores)}`);
    if (stores.length === 0) throw new RangeError('ShardedLedger: options.stores: expected at least one store, got an empty array');
    stores.forEach((store, i) => {
      if (!isLedgerStore(store)) throw new TypeError(`ShardedLedger: options.stores[${i}]: expected a LedgerStore (append, flush, entries, hasTurn, close), got ${describe(store)}`);
      const first = stores.indexOf(store);
      if (first !== i) throw new RangeError(`ShardedLedger: options.stores[${i}]: the same store as options.stores[${first}]; list each store once`);
    });
    this.stores = Object.freeze([...stores]);
    const bounds = stores.map((s) => s.intentTimeoutMs).filter((ms): ms is number => typeof ms === 'number');
    this.intentTimeoutMs = bounds.length === 0 ? undefined : Math.min(...bounds);
    this.#appended = stores.map(() => 0);
    this.#flushed = stores.map(() => 0);
  }

  /** `sharded over N stores (…)`, for messages (`LedgerStore.description`). */
  get description(): string {
    return `sharded over ${this.stores.length} stores (${this.stores.map(describeStore).join(', ')})`;
  }

  /** The store that holds `sessionId`'s history (invariant 1). A TypeError/RangeError names a bad id. */
  storeOf(sessionId: string): LedgerStore {
    checkId('ShardedLedger.storeOf: sessionId', sessionId);
    return this.stores[routeOf(sessionId, this.stores.length)]!;
  }

  /** Appends to the entry's session's store; resolves and rejects as that store's `append` does. */
  append(entry: LedgerEntryInput): Promise<void> {
    const sessionId = (entry as { sessionId?: unknown } | null)?.sessionId;
    try {
      checkId('ShardedLedger.append: entry.sessionId', sessionId);
    } catch (error) {
      return Promise.reject(error);
    }
    const position = routeOf(sessionId, this.stores.length);
    this.#appended[position]!++;
    return this.stores[position]!.append(entry);
  }

  /** Resolves once every entry appended before the call is durable in its store (invariant 2); rejects with a store's own error. */
  async flush(): Promise<void> {
    await settleAll(this.stores.map(async (store, i) => {
      const through = this.#appended[i]!;
      if (through === this.#flushed[i]) return;
      await store.flush();
      this.#flushed[i] = Math.max(this.#flushed[i]!, through);
    }));
  }

  /**
   * The session's entries, from its store, in that store's `seq` order (`afterSeq` and `limit`
   * page as there). `filter.sessionId` is required (invariant 3): a TypeError names it.
   */
  async entries(filter?: LedgerFilter): Promise<LedgerEntry[]> {
    const checked = checkFilter(filter, 'ShardedLedger.entries');
    if (checked.sessionId === undefined) {
      throw new TypeError('ShardedLedger.entries: filter.sessionId: required (each store numbers its own seq, so there is no one order across ' +
        'stores to read or page in); read a store of `ledger.stores` for all of its sessions');
    }
    return this.storeOf(checked.sessionId).entries(filter);
  }

  /** True when one of the stores knows `turnId` is used (a hint: invariant 3). */
  hasTurn(turnId: string): boolean {
    checkId('ShardedLedger.hasTurn: turnId', turnId);
    return this.stores.some((store) => store.hasTurn(turnId));
  }

  /**
   * Closes a dead owner's turn in its session's store (`LedgerStore.closeAbandonedTurn`); false
   * when that store has no such method (it repairs its turns at its next open).
   */
  async closeAbandonedTurn(sessionId: string, turnId: string, reason?: string): Promise<boolean> {
    const store = this.storeOf(sessionId);
    checkId('ShardedLedger.closeAbandonedTurn: turnId', turnId);
    if (store.closeAbandonedTurn === undefined) return false;
    return reason === undefined ? store.closeAbandonedTurn(sessionId, turnId) : store.closeAbandonedTurn(sessionId, turnId, reason);
  }

  /** Closes every store at once, each within its own bound (invariant 5); rejects with a store's own error once all settled. */
  async close(): Promise<void> {
    await settleAll(this.stores.map((store) => store.close()));
  }

  /** `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Waits for every promise; then rejects with the first rejection (in store order), if any (invariant 5). */
async function settleAll(promises: Promise<unknown>[]): Promise<void> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}
