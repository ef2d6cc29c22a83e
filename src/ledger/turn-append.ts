/**
 * A store's own way to append a runner's turn entries: made once a turn, so the turn's ids are
 * checked and encoded once instead of at every entry (a stop storm writes thousands). Held in a
 * WeakMap each store fills when it is made (the file `Ledger`, `PgLedger`); no package entry
 * exports this module, so a caller of a store sees none of it. A store without one gets plain
 * `append` entries (src/turn/turn-writer.ts).
 */

import type { TurnEntryBody } from './entry.js';

/**
 * The appends of one turn: `append` of `{ sessionId, turnId, ...body }` — the same entry, the same
 * checks of the type's fields and the same refusals — for a body the runner built
 * (`renderTurnEntry` says what it must be).
 */
export type TurnAppend = (body: TurnEntryBody) => Promise<void>;

/** Makes the `TurnAppend` of one turn; for a bad id, one whose every append rejects as `append` would. */
export type TurnAppends = (sessionId: string, turnId: string) => TurnAppend;

const appends = new WeakMap<object, TurnAppends>();

/** Called once by a store's constructor; `make` throws the error of `append` for a bad id. */
export function setTurnAppends(store: object, make: TurnAppends): void {
  appends.set(store, (sessionId, turnId) => {
    try {
      return make(sessionId, turnId);
    } catch (error) {
      return () => Promise.reject(error);
    }
  });
}

/** The turn appends of `store`; `undefined` for a store that has none. */
export function turnAppends(store: object): TurnAppends | undefined {
  return appends.get(store);
}
