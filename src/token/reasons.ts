/**
 * What a cancel says: the reason a token keeps when none is given or when its parent was
 * cancelled, and the error that carries a reason (state.ts, invariant 6: a reason is kept as given
 * and only rendered as text here, by `renderReason`, which never throws).
 */

import { StopReasons } from '../constants.js';
import { renderReason, type cancelledError, type CancelledError } from '../errors.js';

/** The reason of a cancel with none given. */
export const DEFAULT_CANCEL_REASON = StopReasons.user;
/** The reason of a token cancelled because its parent was. */
export const PARENT_CANCEL_REASON = 'cancel.parent';

/**
 * The error of a cancel of `turnId` of `sessionId`, built by `make`: `cancelledError` for what
 * the token's own checks throw, `abortReasonError` (named 'AbortError') for `signal.reason`, which
 * other libraries read. Never throws, whatever the reason.
 */
export function cancelReason(reason: unknown, sessionId: string, turnId: string | undefined, make: typeof cancelledError): CancelledError {
  return make(`turn ${turnId ?? '(none)'} of session ${sessionId} was cancelled: ${renderReason(reason)}`, {
    reason, sessionId, turnId,
  });
}
