/**
 * What specs and benches read of a `PgLedger` beyond the `LedgerStore` API: held in a WeakMap the
 * ledger fills when it is made; no package entry exports this module, so a caller sees none of it.
 */

export interface PgLedgerHooks {
  /** The appending transactions sent since open (re-sends included). */
  readonly transactions: number;
}

const hooks = new WeakMap<object, PgLedgerHooks>();

/** Called once by the ledger's constructor. */
export function setPgLedgerHooks(ledger: object, pgHooks: PgLedgerHooks): void {
  hooks.set(ledger, pgHooks);
}

/** The hooks of `ledger`; `undefined` for anything not a `PgLedger` of this copy of the library. */
export function pgLedgerHooks(ledger: object): PgLedgerHooks | undefined {
  return hooks.get(ledger);
}
