/**
 * A user's callback (a `TurnRunner` event listener, exec's `onOutput`) is called so that it can
 * never fail the work that calls it: a throw, or a promise it returns that rejects, becomes a
 * process warning of type `LISTENER_WARNING`, and the work goes on.
 */

import { LISTENER_WARNING } from '../constants.js';

/** Calls `fn`; its throw, or the rejection of a promise (any thenable) it returns, goes to `onError` instead of the caller. */
export function callGuarded(fn: () => unknown, onError: (error: unknown) => void): void {
  let result: unknown;
  try {
    result = fn();
  } catch (error) {
    onError(error);
    return;
  }
  if (result !== null && (typeof result === 'object' || typeof result === 'function')) {
    // Adopted by Promise.resolve, never read here: a `then` getter or a `then` that throws
    // (a hostile thenable) rejects the promise instead of throwing into the caller.
    Promise.resolve(result).then(undefined, onError);
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
