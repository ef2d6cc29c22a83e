/**
 * What fullstop's own modules (the runner's turn writer, specs) reach of a file `Ledger` beyond
 * the `LedgerStore` API. Declared here, held in a WeakMap the ledger fills when it opens; no
 * package entry exports this module, so a caller of the ledger sees none of it.
 */

import type { TurnEntryBody } from './entry.js';

export interface LedgerHooks {
  /** The highest seq known to be on disk (an `fdatasync` covered it); -1 before the first sync. */
  readonly durableSeq: number;
  /** The last seq assigned (0 for an empty file). */
  readonly seq: number;
  /** The `fdatasync`s this ledger has issued since it was opened. */
  readonly syncs: number;
  /**
   * `append` for a runner's turn: `idsJson` from `turnIdsJson(sessionId, turnId)`, made once a
   * turn, and a body the runner built (`renderTurnEntry` says what it must be). The same line, the
   * same checks of the type's fields and the same refusals as `append`.
   */
  appendForTurn(sessionId: string, turnId: string, idsJson: string, body: TurnEntryBody): Promise<void>;
}

const hooks = new WeakMap<object, LedgerHooks>();

/** Called once by the ledger's constructor. */
export function setLedgerHooks(ledger: object, ledgerHooks: LedgerHooks): void {
  hooks.set(ledger, ledgerHooks);
}

/** The hooks of `ledger`; `undefined` for any store but a file `Ledger` of this copy of the library. */
export function ledgerHooks(ledger: object): LedgerHooks | undefined {
  return hooks.get(ledger);
}
