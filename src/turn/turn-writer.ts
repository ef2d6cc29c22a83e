/**
 * One turn's appends to its store. The file `Ledger` takes the turn's ids encoded once
 * (`LedgerHooks.appendForTurn`: a stop storm's lines skip re-checking and re-encoding them); any other
 * `LedgerStore` gets plain `append` entries.
 */

import { turnIdsJson, type LedgerEntryInput, type TurnEntryBody } from '../ledger/entry.js';
import { ledgerHooks } from '../ledger/ledger-hooks.js';
import type { LedgerStore } from '../ledger/store.js';

/** Appends one entry of the turn; `undefined` when there is no store (nothing is written). */
export type TurnWrite = (body: TurnEntryBody) => Promise<void>;

export function turnWriter(store: LedgerStore | undefined, sessionId: string, turnId: string): TurnWrite | undefined {
  if (store === undefined) return undefined;
  const hooks = ledgerHooks(store);
  if (hooks !== undefined) {
    const idsJson = turnIdsJson(sessionId, turnId);
    return (body) => hooks.appendForTurn(sessionId, turnId, idsJson, body);
  }
  return (body) => store.append({ sessionId, turnId, ...body } as LedgerEntryInput);
}
