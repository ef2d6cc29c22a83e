/**
 * Owners: the work started under a token (pool tasks, exec children, pending questions), so a
 * stop can await it and hard-stop what is left. Internal API used by pool/, exec/ and turn/.
 *
 * Rules:
 * - `addOwner` returns the disposer; the owner calls it once its work has settled. Until then it
 *   is counted in `stats().liveOwners` (a leak test sees an owner that was never disposed).
 * - The owners of a token's children count as the token's: `ownersOf(root)` walks the subtree,
 *   because a tool's child token holds the tool's pool task and the runner stops the root.
 * - Whose grace (docs/design.md §2): while a runner stop governs the tree (`governStop`), an owner
 *   must not hard-stop on its own timer; it checks `isStopGoverned(token)` when its token aborts.
 */

import { STATE, type CancelToken } from './token.js';
import type { Owner, TokenState } from './state.js';

export type { Owner };

/** Register `owner` under `token`; returns its disposer (idempotent). */
export function addOwner(token: CancelToken, owner: Owner): () => void {
  addOwnerOf(token, owner);
  return () => removeOwnerOf(token, owner);
}

/** `addOwner` without the disposer closure, for owners that remove themselves (pool tasks: one per task). */
export function addOwnerOf(token: CancelToken, owner: Owner): void {
  const state = token[STATE];
  (state.owners ??= new Set()).add(owner);
  state.counters.owners++;
}

/** Remove `owner` from `token`; a second call does nothing. */
export function removeOwnerOf(token: CancelToken, owner: Owner): void {
  const state = token[STATE];
  if (state.owners?.delete(owner)) state.counters.owners--;
}

/** Every owner still registered under `token` or any of its descendants. */
export function ownersOf(token: CancelToken): Owner[] {
  const out: Owner[] = [];
  collect(token[STATE], out);
  return out;
}

function collect(state: TokenState, out: Owner[]): void {
  if (state.owners !== undefined) for (const owner of state.owners) out.push(owner);
  if (state.children !== undefined) for (const child of state.children) collect(child, out);
}

/** From now on the caller's grace governs every owner of `token`'s tree. */
export function governStop(token: CancelToken): void {
  token[STATE].stopGoverned = true;
}

/**
 * True when a runner stop governs the grace of `token`: it or an ancestor is governed *and*
 * cancelled. A runner governs its turn's root from the start and stops the turn on any cancel of
 * it, so a cancelled governed root means its stop is under way, whichever thread or caller
 * cancelled it; a cancel of a child alone (a tool's own timeout) keeps the owner's own grace.
 * Asking folds in a cancel another thread wrote into an ancestor's slot, so an owner told of its
 * own cancel before its turn's root has heard of it still sees the governed stop.
 */
export function isStopGoverned(token: CancelToken): boolean {
  for (let s: TokenState | undefined = token[STATE]; s !== undefined; s = s.parent) {
    if (s.stopGoverned && s.isCancelled()) return true;
  }
  return false;
}
