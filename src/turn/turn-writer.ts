/**
 * One turn's appends to its store. A store of this library takes the turn's ids checked and
 * encoded once (src/ledger/turn-append.ts: a stop storm's entries skip re-checking and
 * re-encoding them); any other `LedgerStore` gets plain `append` entries.
 */

import type { LedgerEntryInput, TurnEntryBody } from '../ledger/entry.js';
import type { LedgerStore } from '../ledger/store.js';
import { turnAppends } from '../ledger/turn-append.js';

/** Appends one entry of the turn (never throws: a failure is its rejection); `undefined` when there is no store. */
export type TurnWrite = (body: TurnEntryBody) => Promise<void>;

export function turnWriter(store: LedgerStore | undefined, sessionId: string, turnId: string): TurnWrite | undefined {
  if (store === undefined) return undefined;
  const make = turnAppends(store);
  if (make !== undefined) return make(sessionId, turnId);
  return (body) => {
    try {
      return store.append({ sessionId, turnId, ...body } as LedgerEntryInput);
    } catch (error) {
      return Promise.reject(error); // a store of the caller's may throw instead of rejecting
    }
  };
}
