/**
 * The argument checks of the ledgers: the file `Ledger`'s open options and seqs, and the `entries`
 * filter (with paging) that the file `Ledger` and `PgLedger` share, so both refuse alike.
 * Each throws a TypeError or RangeError naming the argument, before anything changes.
 */

import { checkId, checkMs, describe } from '../errors.js';
import type { LedgerFilter } from './store.js';

/** `Ledger.open`'s options. */
export interface LedgerOpenOptions {
  /**
   * Seal the file once it holds this many bytes and go on in a new one (segments: see `Ledger`).
   * Unset: one file that grows for ever.
   * @default undefined
   * @example
   * await Ledger.open('history.jsonl', { segmentBytes: 256 * 1024 * 1024 });
   */
  segmentBytes?: number;
  /**
   * How long `close()` waits for the stops under way to write and flush their history, in ms.
   * @default 10_000 (DEFAULT_LEDGER_CLOSE_WAIT_MS)
   */
  closeWaitMs?: number;
  /**
   * How long a stop's signal waits for its intent (`cancelling`) to be synced, in ms; past it the
   * stop signals anyway and its report's `ledgerError` is a `LedgerTimeoutError` (the sync goes
   * on). A disk that stops answering (a hard NFS mount, a dying disk) never holds a stop.
   * @default 5000 (DEFAULT_LEDGER_INTENT_TIMEOUT_MS)
   */
  intentTimeoutMs?: number;
  /**
   * The bound of a `flush()`'s wait for the disk, and of `close()`'s wait for the syncs under way,
   * in ms: past it they reject with a `LedgerTimeoutError` (the sync goes on; a later flush
   * confirms it, and a closed ledger closes its file once the sync returns). More than 0.
   * @default 10_000 (DEFAULT_LEDGER_TIMEOUT_MS)
   * @example
   * await Ledger.open('history.jsonl', { intentTimeoutMs: 1000, timeoutMs: 5000 });
   */
  timeoutMs?: number;
  /**
   * How long the lock file `<path>.lock` may go unrefreshed before another process, on any host,
   * takes it over, in ms; the holder refreshes it every third of that. The lock says it, so an
   * opener judges a lock by its holder's value. At least 3 (a refresh every ms).
   * @default 30_000 (DEFAULT_LEDGER_LOCK_STALE_MS)
   * @example
   * await Ledger.open('/shared/history.jsonl', { lockStaleMs: 60_000 });
   */
  lockStaleMs?: number;
}

/** `Ledger.open`'s options: `segmentBytes` a positive integer, `closeWaitMs` and `intentTimeoutMs` a timer's ms, `timeoutMs` one more than 0, `lockStaleMs` at least 3. */
export function checkOpenOptions(options: unknown): asserts options is LedgerOpenOptions {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Ledger.open: options: expected an object, got ${describe(options)}`);
  }
  const { segmentBytes, closeWaitMs, intentTimeoutMs, timeoutMs, lockStaleMs } = options as Record<string, unknown>;
  if (segmentBytes !== undefined) {
    if (typeof segmentBytes !== 'number') throw new TypeError(`Ledger.open: options.segmentBytes: expected a number of bytes, got ${describe(segmentBytes)}`);
    if (!Number.isSafeInteger(segmentBytes) || segmentBytes < 1) {
      throw new RangeError(`Ledger.open: options.segmentBytes: expected a positive integer, got ${describe(segmentBytes)}`);
    }
  }
  checkMs('Ledger.open: options.closeWaitMs', closeWaitMs);
  checkMs('Ledger.open: options.intentTimeoutMs', intentTimeoutMs);
  checkMs('Ledger.open: options.timeoutMs', timeoutMs);
  if (timeoutMs === 0) throw new RangeError('Ledger.open: options.timeoutMs: expected more than 0 ms, got 0');
  checkMs('Ledger.open: options.lockStaleMs', lockStaleMs);
  if (lockStaleMs !== undefined && lockStaleMs < 3) {
    throw new RangeError(`Ledger.open: options.lockStaleMs: expected at least 3 ms (the lock is refreshed every third of it), got ${describe(lockStaleMs)}`);
  }
}

/** A seq argument: a non-negative safe integer. */
export function checkSeq(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number') throw new TypeError(`${name}: expected a seq (a number), got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name}: expected a non-negative integer, got ${describe(value)}`);
}

/**
 * `entries`' filter: ids checked as ids, `afterSeq` a seq, `limit` a positive safe integer; returns
 * its fields. `where` names the method in messages (`PgLedger.entries` for the Postgres store).
 */
export function checkFilter(filter: unknown, where = 'Ledger.entries'): LedgerFilter {
  if (filter === undefined) return {};
  if (filter === null || typeof filter !== 'object') {
    throw new TypeError(`${where}: filter: expected an object, got ${describe(filter)}`);
  }
  const { sessionId, turnId, afterSeq, limit } = filter as Record<string, unknown>;
  if (sessionId !== undefined) checkId(`${where}: filter.sessionId`, sessionId);
  if (turnId !== undefined) checkId(`${where}: filter.turnId`, turnId);
  if (afterSeq !== undefined) checkSeq(`${where}: filter.afterSeq`, afterSeq);
  if (limit !== undefined) {
    if (typeof limit !== 'number') throw new TypeError(`${where}: filter.limit: expected a number of entries, got ${describe(limit)}`);
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`${where}: filter.limit: expected a positive integer, got ${describe(limit)}`);
  }
  return { sessionId, turnId, afterSeq, limit } as LedgerFilter;
}
