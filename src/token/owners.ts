/**
 * Owners and stop governance: the work started under a token (pool tasks, exec children, tool
 * calls, pending questions), what a stop does with each kind, and whose grace applies. This is the
 * one home of that policy; the token tree (state.ts) only keeps the owners and tells them of a
 * cancel or a retire. Internal API used by pool/, exec/ and turn/.
 *
 * Rules:
 * 1. `addOwner` returns the disposer; the owner calls it once its work has settled. Until then it
 *    is counted in `stats().liveOwners` (a leak test sees an owner that was never disposed).
 * 2. The owners of a token's children count as the token's: `ownersOf(root)` walks the subtree,
 *    because a tool's child token holds the tool's pool task and the runner stops the root.
 * 3. Whose grace (docs/design.md §2): while a runner stop governs a tree (`governStop` on its root,
 *    and the root cancelled), an owner must not hard-stop on its own timer; it checks
 *    `isStopGoverned(token)` when its token aborts. A cancel of a child alone (a tool's own
 *    timeout) keeps the owner's own grace.
 * 4. An owner that was hard-stopped, by whoever did it (its own timer, or the stop), sets `hard`,
 *    so the stop's report counts it.
 */

import type { OwnerEntry, TreeMember } from './members.js';
import type { TokenState } from './state.js';
import { tokenState, type CancelToken } from './token.js';

/**
 * What an owner is, and so how a stop treats it:
 * - `task`: a pool task. The grace waits for it; the hard stop terminates its worker.
 * - `process`: an exec child's process tree. The grace waits for it; the hard stop kills the tree.
 * - `call`: a tool call of a turn. The grace waits for it; it has nothing of its own to hard-stop.
 * - `question`: a pending `ask`. Only an answer or the hard stop ends it, so the grace does not
 *   wait for it; the hard stop rejects it.
 */
export type OwnerKind = 'task' | 'process' | 'call' | 'question';

/** A unit of work registered under a token. */
export interface Owner extends TreeMember {
  readonly kind: OwnerKind;
  /** Resolves (never rejects) once the work has settled, however it ended. */
  readonly settled: Promise<unknown>;
  /** Irreversibly stop what is left. Resolves once it is stopped. */
  hardStop(): Promise<unknown> | void;
  /** Set once the work was hard-stopped, by whoever did it (rule 4); absent or false otherwise. */
  readonly hard?: boolean;
}

/** An owner that is its own list entry (one per pool task: no allocation to register it). */
export interface LinkedOwner extends Owner, OwnerEntry {
  readonly owner?: undefined;
}

export type { OwnerEntry };

/** True for the kinds a stop's grace waits for: those that settle by themselves once signalled. */
export function settlesByItself(kind: OwnerKind): boolean {
  return kind !== 'question';
}

/** The roots whose stops govern their trees' grace (rule 3); a retired root is collected with its state. */
const governed = new WeakSet<TokenState>();

/** Register `owner` under `token`; returns its disposer (idempotent). */
export function addOwner(token: CancelToken, owner: Owner): () => void {
  const state = tokenState(token);
  const entry: OwnerEntry = { owner, ownerPrev: undefined, ownerNext: undefined, ownerLinked: false };
  state.addOwner(entry);
  return () => state.removeOwner(entry);
}

/**
 * `addOwner` for an owner that is its own list entry and removes itself (pool tasks: one
 * per task, so no entry and no disposer to allocate); a second call does nothing.
 */
export function addOwnerOf(token: CancelToken, owner: LinkedOwner): void {
  tokenState(token).addOwner(owner);
}

/** Remove `owner` (added by `addOwnerOf`) from `token`; a second call does nothing. */
export function removeOwnerOf(token: CancelToken, owner: LinkedOwner): void {
  tokenState(token).removeOwner(owner);
}

/** Every owner still registered under `token` or any of its descendants. */
export function ownersOf(token: CancelToken): Owner[] {
  // Every member of a tree is added through this module, so each is an Owner.
  return tokenState(token).collectOwners([]) as Owner[];
}

/** From now on the caller's grace governs every owner of `token`'s tree (rule 3). */
export function governStop(token: CancelToken): void {
  governed.add(tokenState(token));
}

/**
 * True when a runner stop governs the grace of `token` (rule 3): it or an ancestor is
 * governed *and* cancelled. A runner governs its turn's root from the start and stops the turn on
 * any cancel of it, so a cancelled governed root means its stop is under way, whoever cancelled
 * it. `isCancelled()` folds in a cancel another thread wrote into an ancestor's slot, so an owner
 * told of its own cancel before the root has heard of it still sees the governed stop.
 */
export function isStopGoverned(token: CancelToken): boolean {
  for (let s: TokenState | undefined = tokenState(token); s !== undefined; s = s.parent) {
    if (governed.has(s) && s.isCancelled()) return true;
  }
  return false;
}
