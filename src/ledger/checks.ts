/**
 * The argument checks of the file `Ledger`: its open options, its filter (with paging) and seqs.
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
}

/** `Ledger.open`'s options: `segmentBytes` a positive integer, `closeWaitMs` a timer's ms. */
export function checkOpenOptions(options: unknown): asserts options is LedgerOpenOptions {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Ledger.open: options: expected an object, got ${describe(options)}`);
  }
  const { segmentBytes, closeWaitMs } = options as Record<string, unknown>;
  if (segmentBytes !== undefined) {
    if (typeof segmentBytes !== 'number') throw new TypeError(`Ledger.open: options.segmentBytes: expected a number of bytes, got ${describe(segmentBytes)}`);
    if (!Number.isSafeInteger(segmentBytes) || segmentBytes < 1) {
      throw new RangeError(`Ledger.open: options.segmentBytes: expected a positive integer, got ${describe(segmentBytes)}`);
    }
  }
  checkMs('Ledger.open: options.closeWaitMs', closeWaitMs);
}

/** A seq argument: a non-negative safe integer. */
export function checkSeq(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number') throw new TypeError(`${name}: expected a seq (a number), got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name}: expected a non-negative integer, got ${describe(value)}`);
}

/** `entries`' filter: ids checked as ids, `afterSeq` a seq, `limit` a positive safe integer; returns its fields. */
export function checkFilter(filter: unknown): LedgerFilter {
  if (filter === undefined) return {};
  if (filter === null || typeof filter !== 'object') {
    throw new TypeError(`Ledger.entries: filter: expected an object, got ${describe(filter)}`);
  }
  const { sessionId, turnId, afterSeq, limit } = filter as Record<string, unknown>;
  if (sessionId !== undefined) checkId('Ledger.entries: filter.sessionId', sessionId);
  if (turnId !== undefined) checkId('Ledger.entries: filter.turnId', turnId);
  if (afterSeq !== undefined) checkSeq('Ledger.entries: filter.afterSeq', afterSeq);
  if (limit !== undefined) {
    if (typeof limit !== 'number') throw new TypeError(`Ledger.entries: filter.limit: expected a number of entries, got ${describe(limit)}`);
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`Ledger.entries: filter.limit: expected a positive integer, got ${describe(limit)}`);
  }
  return { sessionId, turnId, afterSeq, limit } as LedgerFilter;
}
