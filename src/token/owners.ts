/**
 * Owners: the work started under a token (pool tasks, exec children, pending questions), so a
 * stop can await it and hard-stop what is left. Internal API used by pool/, exec/ and turn/; each
 * function is one call into the token's state (state.ts), which keeps the sets and the counts.
 *
 * Rules:
 * - `addOwner` returns the disposer; the owner calls it once its work has settled. Until then it
 *   is counted in `stats().liveOwners` (a leak test sees an owner that was never disposed).
 * - The owners of a token's children count as the token's: `ownersOf(root)` walks the subtree,
 *   because a tool's child token holds the tool's pool task and the runner stops the root.
 * - Whose grace (docs/design.md §2): while a runner stop governs the tree (`governStop`), an owner
 *   must not hard-stop on its own timer; it checks `isStopGoverned(token)` when its token aborts.
 */

import type { LinkedOwner, Owner, OwnerEntry } from './state.js';
import { STATE, type CancelToken } from './token.js';

export type { LinkedOwner, Owner };

/** @internal Register `owner` under `token`; returns its disposer (idempotent). */
export function addOwner(token: CancelToken, owner: Owner): () => void {
  const state = token[STATE];
  const entry: OwnerEntry = { owner, ownerPrev: undefined, ownerNext: undefined, ownerLinked: false };
  state.addOwner(entry);
  return () => state.removeOwner(entry);
}

/**
 * @internal `addOwner` for an owner that is its own list entry and removes itself (pool tasks: one
 * per task, so no entry and no disposer to allocate); a second call does nothing.
 */
export function addOwnerOf(token: CancelToken, owner: LinkedOwner): void {
  token[STATE].addOwner(owner);
}

/** @internal Remove `owner` (added by `addOwnerOf`) from `token`; a second call does nothing. */
export function removeOwnerOf(token: CancelToken, owner: LinkedOwner): void {
  token[STATE].removeOwner(owner);
}

/** @internal Every owner still registered under `token` or any of its descendants. */
export function ownersOf(token: CancelToken): Owner[] {
  return token[STATE].collectOwners([]);
}

/** @internal From now on the caller's grace governs every owner of `token`'s tree. */
export function governStop(token: CancelToken): void {
  token[STATE].governStop();
}

/**
 * @internal True when a runner stop governs the grace of `token` (see `TokenState.isStopGoverned`:
 * a governed ancestor that is cancelled).
 */
export function isStopGoverned(token: CancelToken): boolean {
  return token[STATE].isStopGoverned();
}
