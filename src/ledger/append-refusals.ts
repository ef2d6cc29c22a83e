/**
 * Why a file `Ledger` refuses an append, and the error that says so (ledger.ts): once closed; once
 * broken by a failed write (invariant 4: the first failure, again); past `Number.MAX_SAFE_INTEGER`
 * (invariant 8); a `turn_started` of a turn the files hold (invariant 7); anything of a turn that
 * has ended (invariant 11); a line longer than `LEDGER_MAX_LINE_BYTES`. A refused append writes
 * nothing and uses no seq.
 */

import { LEDGER_MAX_LINE_BYTES } from '../constants.js';
import { LedgerClosedError, TurnEndedError, TurnIdUsedError } from '../errors.js';
import type { TurnIds } from './turn-ids.js';

/** The refusal of an append to the closed ledger at `path`. */
export function closedError(path: string): LedgerClosedError {
  return new LedgerClosedError(`Ledger.append: the ledger "${path}" is closed`);
}

/**
 * Why the ledger at `path` takes no entry now, before one is rendered, or `undefined`: `closed`,
 * the writer's `failure`, or `seq` (the last one assigned) at the end of the safe integers.
 */
export function ledgerRefusal(path: string, closed: boolean, failure: Error | undefined, seq: number): Error | undefined {
  if (closed) return closedError(path);
  if (failure !== undefined) return failure;
  if (seq + 1 > Number.MAX_SAFE_INTEGER) {
    return new RangeError(`Ledger.append: "${path}" has reached seq ${seq} (Number.MAX_SAFE_INTEGER); ` +
      'no later seq can be read back exactly, so start a new ledger file');
  }
  return undefined;
}

/** Why a rendered line of `bytes` (an entry of `type` of `turnId`) is refused, or `undefined`. */
export function lineRefusal(path: string, turnIds: TurnIds, turnId: string, type: string, bytes: number): Error | undefined {
  if (type === 'turn_started' && turnIds.has(turnId)) {
    return new TurnIdUsedError(`Ledger.append: turn ${JSON.stringify(turnId)} is already in "${path}"; ` +
      'a turn id is used once (a second turn under it could never be told apart from the first)', turnId);
  }
  if (turnIds.ended(turnId)) {
    return new TurnEndedError(`Ledger.append: turn ${JSON.stringify(turnId)} has ended in "${path}" (its terminal status is ` +
      'recorded); nothing of a turn is appended after its end', turnId);
  }
  if (bytes > LEDGER_MAX_LINE_BYTES) {
    return new RangeError(`Ledger.append: the entry's line is ${bytes} bytes, over the ${LEDGER_MAX_LINE_BYTES} ` +
      'a ledger line may hold (LEDGER_MAX_LINE_BYTES); record a large output as a file and its path');
  }
  return undefined;
}
