/**
 * A user's callback (a `TurnRunner` event listener, exec's `onOutput`) is called so that it can
 * never fail the work that calls it: a throw, or a promise it returns that rejects, becomes a
 * process warning of type `LISTENER_WARNING`, and the work goes on.
 */

import { LISTENER_WARNING } from '../constants.js';

/** Calls `fn`; its throw, or the rejection of a promise it returns, goes to `onError` instead of the caller. */
export function callGuarded(fn: () => unknown, onError: (error: unknown) => void): void {
  let result: unknown;
  try {
    result = fn();
  } catch (error) {
    onError(error);
    return;
  }
  if (typeof (result as PromiseLike<unknown> | null | undefined)?.then === 'function') {
    (result as PromiseLike<unknown>).then(undefined, onError);
  }
}

/** Reports a callback's failure as a `LISTENER_WARNING` with `code`; never throws (reporting must not become the failure it reports). */
export function warnCallbackFailed(message: string, code: string): void {
  try {
    process.emitWarning(message, { type: LISTENER_WARNING, code });
  } catch {
    // Nothing left to tell.
  }
}
