/**
 * What fullstop's own specs and benches reach of a file `Ledger` beyond
 * the `LedgerStore` API. Declared here, held in a WeakMap the ledger fills when it opens; no
 * package entry exports this module, so a caller of the ledger sees none of it.
 */

export interface LedgerHooks {
  /** The highest seq known to be on disk (an `fdatasync` covered it); -1 before the first sync. */
  readonly durableSeq: number;
  /** The last seq assigned (0 for an empty file). */
  readonly seq: number;
  /** The `fdatasync`s this ledger has issued since it was opened. */
  readonly syncs: number;
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
