/**
 * Ambient binding of a turn's token, so deep code can `checkCancelled()` without threading the
 * token through every call. AsyncLocalStorage carries it across awaits.
 *
 * Two bindings, merged when nested: a token (`runInTurn`) and a session (`runInSession`). A bound
 * token always wins over a bound session, whichever was bound first; a session binding is looked
 * up in its registry at check time, so it follows the session from turn to turn.
 */

import { AsyncLocalStorage } from 'node:async_hooks';
import { checkFunction, checkId, describe } from '../errors.js';
import { turns, type TurnRegistry } from './registry.js';
import { isCancelToken, type CancelToken } from './token.js';

interface Binding {
  readonly token: CancelToken | undefined;
  readonly sessionId: string | undefined;
  readonly registry: TurnRegistry | undefined;
}

const storage = new AsyncLocalStorage<Binding>();

/** Run `fn` with `token` bound (across its awaits too); returns what `fn` returns. */
export function runInTurn<T>(token: CancelToken, fn: () => T): T {
  if (!isCancelToken(token)) throw new TypeError(`token: expected a CancelToken, got ${describe(token)}`);
  checkFunction('fn', fn);
  const outer = storage.getStore();
  return storage.run({ token, sessionId: outer?.sessionId, registry: outer?.registry }, fn);
}

/** Run `fn` bound to a session: checks inside it follow that session's current token. */
export function runInSession<T>(sessionId: string, fn: () => T, registry?: TurnRegistry): T {
  checkId('sessionId', sessionId);
  checkFunction('fn', fn);
  if (registry !== undefined && typeof (registry as Partial<TurnRegistry>)?.currentToken !== 'function') {
    throw new TypeError(`registry: expected a TurnRegistry, got ${describe(registry)}`);
  }
  const outer = storage.getStore();
  return storage.run({ token: outer?.token, sessionId, registry: registry ?? turns }, fn);
}

/** The context-bound token, else the bound session's current token, else undefined. */
export function activeToken(): CancelToken | undefined {
  const binding = storage.getStore();
  if (binding === undefined) return undefined;
  if (binding.token !== undefined) return binding.token;
  return binding.sessionId === undefined ? undefined : binding.registry!.currentToken(binding.sessionId);
}

/** Throws `CancelledError` if `activeToken()` is cancelled; a no-op when nothing is bound. */
export function checkCancelled(): void {
  activeToken()?.throwIfCancelled();
}
