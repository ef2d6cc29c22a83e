/**
 * The engine behind `CancelToken`: the token tree, cancel propagation and retirement.
 * `CancelToken` (token.ts) is a thin facade; every rule lives here.
 *
 * Invariants (docs/design.md §1)
 *
 * 1. Cancel flows down only: cancelling a token cancels its whole subtree; a child's cancel
 *    never reaches its parent. A child made of a cancelled token starts cancelled.
 * 2. Retire is one-way and happens once. Children retire with their parent. After retire,
 *    `cancel()` returns false and changes nothing, so a late stop cannot reach a later turn.
 * 3. The slot is the cross-thread truth, this object is the main thread's view of it. Every
 *    main-thread read first folds in a cancel that another thread wrote into the slot
 *    (`syncFromSlot`), so the two never disagree for longer than one check.
 * 4. On cancel, every slot of the subtree is tripped (workers wake) before any signal of the
 *    subtree aborts (listeners run), so a listener always sees the whole subtree cancelled.
 *    What is *not* guaranteed: atomicity across the subtree as seen from other threads — a worker
 *    may observe the parent cancelled a few nanoseconds before its child's slot.
 * 5. Every resource a token holds (slot, bridge, adopted listener) is counted in `Counters` and
 *    released at retire at the latest. Owners are told at retire (`onRetire`) and stay counted
 *    until they dispose themselves, so an owner that never settles shows in `stats()`.
 */

import { CancelledError, cancelledError } from '../errors.js';
import { arm, release } from './bridge.js';
import type { SlabSet, SlotRef } from './slab.js';
import { cancelSlot, readState, sealSlot, STATE_CANCELLED } from './slot.js';

/** A unit of work registered under a token (see owners.ts). */
export interface Owner {
  /** What it is, for the StopReport's counts: 'task' | 'process' | 'question' | ... */
  readonly kind: string;
  /** Resolves (never rejects) once the work has settled, however it ended. */
  readonly settled: Promise<unknown>;
  /** Irreversibly stop what is left. Resolves once it is stopped. */
  hardStop(): Promise<unknown> | void;
  /** Called right after the token (or an ancestor) is cancelled, from any thread, once. */
  onCancel?(): void;
  /** Called when the token retires with this owner still registered. */
  onRetire?(): void;
}

/** Per-registry resource counts behind `stats()`. */
export interface Counters {
  tokens: number;
  bridges: number;
  owners: number;
}

export const DEFAULT_CANCEL_REASON = 'cancel.user';
export const PARENT_CANCEL_REASON = 'cancel.parent';

export class TokenState {
  readonly slabs: SlabSet;
  readonly counters: Counters;
  readonly slot: SlotRef;
  readonly sessionId: string;
  readonly turnId: string | undefined;
  /** `undefined` for a root token. */
  parent: TokenState | undefined;
  /** `undefined` until the first child. */
  children: Set<TokenState> | undefined;
  /** `undefined` until someone reads `signal` or the token is cancelled (lazy: cheap turns). */
  controller: AbortController | undefined;
  /** Detaches an adopted controller's abort listener; `undefined` when nothing is adopted. */
  detachAdopted: (() => void) | undefined;
  /** True while this token's handle has left the thread and its slab's bridge watches it (bridge.ts). */
  exported = false;
  /** `undefined` until the first owner registers. */
  owners: Set<Owner> | undefined;
  /** Set by a runner stop: the stop's grace governs every owner below (docs/design.md §2). */
  stopGoverned = false;
  cancelled = false;
  retired = false;
  reason: unknown = undefined;
  /** The public `CancelToken` of this state; `undefined` until first asked for. */
  facade: object | undefined;
  /** Called once at retire (the registry forgets its session's token). */
  onRetired: ((state: TokenState) => void) | undefined;

  constructor(slabs: SlabSet, counters: Counters, sessionId: string, turnId: string | undefined, parent?: TokenState) {
    this.slabs = slabs;
    this.counters = counters;
    this.sessionId = sessionId;
    this.turnId = turnId;
    this.parent = parent;
    this.slot = slabs.claim();
    counters.tokens++;
    if (parent !== undefined) {
      (parent.children ??= new Set()).add(this);
      if (parent.isCancelled()) this.cancel(PARENT_CANCEL_REASON);
    }
  }

  /** Main thread's view, folding in a cancel written by another thread (invariant 3). */
  isCancelled(): boolean {
    if (!this.cancelled && !this.retired) this.syncFromSlot();
    return this.cancelled;
  }

  /**
   * Fold in a cancel another thread wrote into this token's slot *or an ancestor's* (invariants
   * 1 and 3): a worker holding the root's handle cancels the root's slot only, and until the
   * bridge runs (a later task) nobody has propagated it down. Without the walk, a child read
   * before its parent would say "running" while the parent says "cancelled". The topmost
   * cancelled ancestor is folded in, so reasons come out as if the cancel had been made here.
   * Cost: one `Atomics.load` per level, and only while this token is not yet cancelled.
   */
  syncFromSlot(): void {
    let top: TokenState | undefined;
    for (let s: TokenState | undefined = this; s !== undefined && !s.cancelled; s = s.parent) {
      const { slab, index, generation } = s.slot;
      if (readState(slab.cells, index, generation) === STATE_CANCELLED) top = s;
    }
    top?.cancelFromSlot();
  }

  /** Another thread tripped this slot; the bridge (or a read) brings it to the main thread. */
  cancelFromSlot(): void {
    this.cancel(DEFAULT_CANCEL_REASON);
  }

  /** See invariants 1, 2 and 4. Returns false once retired, true otherwise. */
  cancel(reason: unknown): boolean {
    if (this.retired) return false;
    if (this.cancelled) return true;
    const subtree = this.#collectRunning([]);
    this.reason = reason;
    for (const state of subtree) {
      if (state !== this) state.reason = PARENT_CANCEL_REASON;
      state.cancelled = true;
      cancelSlot(state.slot.slab.cells, state.slot.index, state.slot.generation);
      release(state);
    }
    for (const state of subtree) state.controller?.abort(state.abortReason());
    for (const state of subtree) if (state.owners !== undefined) for (const owner of [...state.owners]) owner.onCancel?.();
    return true;
  }

  #collectRunning(into: TokenState[]): TokenState[] {
    if (this.cancelled || this.retired) return into;
    into.push(this);
    if (this.children !== undefined) for (const child of this.children) child.#collectRunning(into);
    return into;
  }

  /** The `signal.reason` of a cancelled token. */
  abortReason(): CancelledError {
    return cancelledError(`turn ${this.turnId ?? '(none)'} of session ${this.sessionId} was cancelled: ${String(this.reason)}`, {
      reason: this.reason, sessionId: this.sessionId, turnId: this.turnId,
    });
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.isCancelled()) this.controller.abort(this.abortReason());
    }
    return this.controller.signal;
  }

  /** The handle is about to leave this thread: from now on a cancel may come from elsewhere. */
  exportSlot(): SlotRef {
    arm(this);
    return this.slot;
  }

  child(): TokenState {
    if (this.retired) {
      throw new CancelledError(`cannot make a child of a retired token (turn ${this.turnId ?? '(none)'} of session ${this.sessionId} has ended)`, {
        reason: this.reason, sessionId: this.sessionId, turnId: this.turnId,
      });
    }
    return new TokenState(this.slabs, this.counters, this.sessionId, this.turnId, this);
  }

  /** Invariants 2 and 5: children first, then this token's slot, bridge, listener and owners. */
  retire(): void {
    if (this.retired) return;
    // From here on no other thread can cancel this slot; one that already did is folded in next.
    sealSlot(this.slot.slab.cells, this.slot.index, this.slot.generation);
    this.syncFromSlot();
    // That sync may have folded in a cancel from another thread and run abort listeners, and a
    // listener may already have retired this token (e.g. by ending the turn or beginning the
    // session's next one). Retire once (invariant 2): a second release would push the cell onto
    // the free list twice and overwrite its next owner's word with this token's RETIRED(g), so
    // the next two claims would share one slot and one generation.
    if (this.retired) return;
    if (this.children !== undefined) for (const child of [...this.children]) child.retire();
    this.retired = true;
    release(this);
    this.slabs.release(this.slot);
    this.counters.tokens--;
    this.detachAdopted?.();
    this.detachAdopted = undefined;
    this.parent?.children?.delete(this);
    this.parent = undefined;
    if (this.owners !== undefined) for (const owner of [...this.owners]) owner.onRetire?.();
    this.onRetired?.(this);
    this.onRetired = undefined;
  }

  isStopGoverned(): boolean {
    for (let s: TokenState | undefined = this; s !== undefined; s = s.parent) if (s.stopGoverned) return true;
    return false;
  }
}
