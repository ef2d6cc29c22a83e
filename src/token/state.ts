/**
 * The engine behind `CancelToken`: the token tree, cancel propagation, retirement, and the work
 * registered under a token. `CancelToken` (token.ts) is a thin facade, owners.ts and the registry
 * call in here; every rule lives in this module, and no other module writes a token's state.
 *
 * Invariants (the model behind them: docs/design.md §1)
 *
 * 1. Cancel flows down only: cancelling a token cancels its whole subtree; a child's cancel
 *    never reaches its parent. A child made of a cancelled token starts cancelled.
 * 2. Retire is one-way and happens once. Children retire with their parent. After retire,
 *    `cancel()` returns false and changes nothing, so a late stop cannot reach a later turn.
 * 3. The slot is the cross-thread truth, this object is the main thread's view of it. Every
 *    main-thread read first folds in a cancel that another thread wrote into the slot
 *    (`#syncFromSlot`), so the two never disagree for longer than one check.
 * 4. On cancel, every slot of the subtree is tripped (workers wake) before any signal of the
 *    subtree aborts (listeners run), so a listener always sees the whole subtree cancelled.
 *    What is *not* guaranteed: atomicity across the subtree as seen from other threads — a worker
 *    may observe the parent cancelled a few nanoseconds before its child's slot.
 * 5. Every resource a token holds (slot, bridge, adopted listener) is counted in `Counters`
 *    (host.ts) and given back at retire at the latest. Owners are told at retire (`onRetire`) and
 *    stay counted until they remove themselves, so an owner that never settles shows in `stats()`.
 * 6. A cancel cannot stop half-way. Its reason is kept as given and only rendered as text
 *    through `renderReason` (reasons.ts), which never throws; nothing caller-supplied runs between
 *    tripping the first slot and aborting the last signal except abort listeners, whose throws
 *    Node reports on its own without unwinding `abort()`.
 * 7. Only this module writes a token's fields. The bridge sees a token as `Watched` (its slot and
 *    `cancelFromSlot`), owners and the registry call the methods below, and everyone else reads.
 *    One write is made elsewhere, by design: the facade's `cancel()` flips the token's own slot
 *    (and wakes it when `slot.wakeOnFlip`, which this module keeps current) as its first step,
 *    then hands over to `cancelFlipped`. It is `flipSlot` below, inlined (see `CancelToken.cancel`).
 */

import { abortReasonError, CancelledError, cancelledError } from '../errors.js';
import { unwatch, watch, type Watched } from './bridge.js';
import type { TokenHost } from './host.js';
import type { OwnerEntry, TreeMember } from './members.js';
import { cancelReason, DEFAULT_CANCEL_REASON, PARENT_CANCEL_REASON } from './reasons.js';
import type { SlotRef } from './slab.js';
import { bumpControl, sealSlot, tripSlot, wakeSlot } from './slot.js';

/**
 * A cancel's first step: RUNNING → CANCELLED by compareExchange on the token's own slot,
 * and at once its notify when `slot.wakeOnFlip` (a leaf whose handle another thread can sleep on).
 * True if this call flipped it. The slot's control cell is bumped later (`cancelFlipped`): no
 * sleeper of the slot waits for that. `CancelToken.cancel` makes the same two steps inline.
 */
function flipSlot(slot: SlotRef): boolean {
  const flipped = tripSlot(slot.cells, slot.index, slot.runningWord, slot.cancelledWord);
  if (flipped && slot.wakeOnFlip) Atomics.notify(slot.cells, slot.index);
  return flipped;
}

/** A token's engine: the rules `CancelToken` (its facade) calls into. Not exported from a package entry. */
export class TokenState implements Watched {
  readonly host: TokenHost;
  readonly slot: SlotRef;
  readonly sessionId: string;
  readonly turnId: string | undefined;
  /** `undefined` for a root token, and once retired. */
  #parent: TokenState | undefined;
  /** `undefined` until the first child. */
  #children: Set<TokenState> | undefined;
  /** `undefined` until someone reads `signal` or the token is cancelled (lazy: cheap turns). */
  #controller: AbortController | undefined;
  /** Detaches an adopted controller's abort listener; `undefined` when nothing is adopted. */
  #detachAdopted: (() => void) | undefined;
  /** True while this token's handle has left the thread and its slab's bridge watches it. */
  #watched = false;
  /**
   * True once a handle that can wait on the slot has left this thread (ever). Until then no other
   * thread can sleep on the slot, so a cancel flips it and wakes nobody: one notify less on the
   * stop's path. (A thread that only polls needs no wake: it sees the flip.) `slot.wakeOnFlip`
   * is this and "no children yet".
   */
  #exported = false;
  /** The owners, oldest first (`addOwner`); `undefined` when there are none. */
  #ownersHead: OwnerEntry | undefined;
  #ownersTail: OwnerEntry | undefined;
  #cancelled = false;
  #retired = false;
  #reason: unknown = undefined;
  /**
   * The `signal.reason` of a cancel with the default reason, built ahead of time once this token
   * has both a signal and a handle on another thread (see `#prepareDefaultReason`).
   */
  #defaultReason: CancelledError | undefined;
  /** The public `CancelToken` of this state; `undefined` until first asked for. */
  #facade: object | undefined;
  /** Called once at retire (the registry forgets its session's token); `undefined` for a child. */
  #onRetired: ((state: TokenState) => void) | undefined;

  constructor(host: TokenHost, sessionId: string, turnId: string | undefined, parent: TokenState | undefined,
    onRetired: ((state: TokenState) => void) | undefined) {
    this.host = host;
    this.sessionId = sessionId;
    this.turnId = turnId;
    this.#parent = parent;
    this.#onRetired = onRetired;
    this.slot = host.slabs.claim();
    host.counters.tokens++;
    if (parent !== undefined) {
      (parent.#children ??= new Set()).add(this);
      // The parent's flip may no longer wake its own slot at once: its children are flipped first.
      parent.slot.wakeOnFlip = false;
      if (parent.isCancelled()) this.cancel(PARENT_CANCEL_REASON); // invariant 1
    }
  }

  get parent(): TokenState | undefined { return this.#parent; }
  get retired(): boolean { return this.#retired; }
  /** The reason as given to the first cancel that reached this token (invariant 6). */
  get reason(): unknown { return this.#reason; }

  /** Main thread's view, folding in a cancel written by another thread (invariant 3). */
  isCancelled(): boolean {
    if (!this.#cancelled && !this.#retired) this.#syncFromSlot();
    return this.#cancelled;
  }

  /**
   * Fold in a cancel another thread wrote into this token's slot *or an ancestor's* (invariants
   * 1 and 3): a worker holding the root's handle cancels the root's slot only, and until the
   * bridge runs (a later task) nobody has propagated it down. Without the walk, a child read
   * before its parent would say "running" while the parent says "cancelled". The topmost
   * cancelled ancestor is folded in, so reasons come out as if the cancel had been made here.
   * Cost: one `Atomics.load` per level, and only while this token is not yet cancelled.
   */
  #syncFromSlot(): void {
    let top: TokenState | undefined;
    for (let s: TokenState | undefined = this; s !== undefined && !s.#cancelled; s = s.#parent) {
      if (Atomics.load(s.slot.cells, s.slot.index) === s.slot.cancelledWord) top = s;
    }
    top?.cancelFromSlot();
  }

  /** Watched: another thread tripped this slot; the bridge (or a read) brings it to the main thread. */
  cancelFromSlot(): void {
    // The other thread flipped the slot and woke its sleepers: nothing for `flipSlot` to do. A leaf
    // (a token with no children, such as a turn whose task was run with the turn's own token) takes
    // `cancelFlipped`'s leaf steps right here, on a main thread the bridge has just woken: going
    // through `cancelFlipped` measured slower to the signal's listeners. A token with children
    // takes the general path.
    if (this.#retired || this.#cancelled) return;
    if (this.#children !== undefined) return void this.cancelFlipped(DEFAULT_CANCEL_REASON, false);
    this.#cancelled = true;
    this.#reason = DEFAULT_CANCEL_REASON;
    this.#controller?.abort(this.#reasonOnCancel());
    this.#tellOwners();
  }

  /**
   * See invariants 1, 2, 4 and 6. Returns false once retired, true otherwise.
   *
   * Ordered for the thread that waits. First every slot of the subtree is flipped: this token's
   * (`flipSlot`, the call's first step), then each running descendant's as the walk finds it, with
   * no notify in between: a worker polling a descendant's slot sees its flip after a few
   * compareExchanges rather than after a notify per ancestor. A leaf's own slot is woken with its
   * flip, before this object's fields are touched: a cancel comes to a main thread gone cold, and
   * each object fetched first is time the woken worker waits (measured on bench row P1). A
   * subtree's slots another thread can wait on are woken (`#wake`; no other slot can have a
   * sleeper) once all are flipped, descendants first: the work a cancel is timed
   * by (a pool task, a tool) sits below the turn's root. Everything a sleeper does not need
   * (building reasons, aborting signals, telling owners) comes after the last notify, and a leaf
   * token allocates nothing on the way.
   */
  cancel(reason: unknown): boolean {
    return this.cancelFlipped(reason, flipSlot(this.slot));
  }

  /**
   * The rest of `cancel`, once `flipSlot` (or the facade's inlined copy of it) has run: `flipped`
   * says whether it moved the slot. Not flipped: another thread cancelled this slot first (the
   * bridge or a read brought it here) and woke its sleepers itself; or this token is retired or
   * cancelled already (its word is no longer RUNNING of its generation), which the checks find.
   */
  cancelFlipped(reason: unknown, flipped: boolean): boolean {
    if (this.#retired) return false;
    if (this.#cancelled) return true;
    this.#cancelled = true;
    this.#reason = reason;
    // A leaf (every pool task's token and most turns' roots) needs no subtree list at all, and its
    // slot's sleepers were woken with the flip (`wakeOnFlip`); the control cell is left.
    if (this.#children === undefined) {
      if (flipped && this.#exported) bumpControl(this.slot.cells);
      this.#controller?.abort(this.#reasonOnCancel());
      this.#tellOwners();
      return true;
    }
    const subtree = this.#tripChildren([this]);
    // Descendants deepest-found first, this token last. A descendant's flip fails only if another
    // thread cancelled that very slot first; its second wake finds nobody.
    for (let i = subtree.length - 1; i > 0; i--) subtree[i]!.#wake();
    if (flipped) this.#wake();
    // The bridge keeps watching a cancelled token until it retires (a later cancel through its
    // handle finds it cancelled and changes nothing). Unwatching here would disarm the slab's
    // bridge, and its notify, which resolves an async waiter inside the engine, right after the
    // slot's notify delays the worker that one has just woken (measured on bench row P1; most
    // likely both take the engine's one wait-list lock).
    for (const state of subtree) state.#controller?.abort(state.#reasonOnCancel());
    for (const state of subtree) state.#tellOwners();
    return true;
  }

  /** Wake the slot's sleepers, if another thread can have any (`#exported`). */
  #wake(): void {
    if (this.#exported) wakeSlot(this.slot.cells, this.slot.index);
  }

  /** Mark and flip (no wake) every running descendant, parents before children; returns the whole subtree, this token first. */
  #tripChildren(into: TokenState[]): TokenState[] {
    if (this.#children !== undefined) {
      for (const child of this.#children) {
        if (child.#cancelled || child.#retired) continue;
        child.#cancelled = true;
        child.#reason = PARENT_CANCEL_REASON;
        const slot = child.slot;
        tripSlot(slot.cells, slot.index, slot.runningWord, slot.cancelledWord);
        into.push(child);
        child.#tripChildren(into);
      }
    }
    return into;
  }

  #tellOwners(): void {
    if (this.#ownersHead === undefined) return;
    for (const owner of this.#ownOwners([])) owner.onCancel?.();
  }

  /** Push this token's owners onto `out`, oldest first (a copy: an owner told may remove itself). */
  #ownOwners(out: TreeMember[]): TreeMember[] {
    for (let e = this.#ownersHead; e !== undefined; e = e.ownerNext) out.push(e.owner ?? (e as OwnerEntry & TreeMember));
    return out;
  }

  /** What `signal` aborts with: the reason built ahead of time when it applies, else a fresh one. */
  #reasonOnCancel(): CancelledError {
    return this.#reason === DEFAULT_CANCEL_REASON && this.#defaultReason !== undefined ? this.#defaultReason : this.#buildReason(this.#reason, abortReasonError);
  }

  /**
   * A token whose handle has left the thread and whose signal someone listens to is the one
   * whose abort a worker waits for across threads (`cancelTurn()`, a bridge wake). Its cancel
   * then almost always carries the default reason (a slot carries no reason), so that reason is
   * built now, once, instead of on the wake path between the bridge's wake and the listener.
   */
  #prepareDefaultReason(): void {
    if (this.#defaultReason !== undefined || !this.#watched || this.#controller === undefined) return;
    this.#defaultReason = this.#buildReason(DEFAULT_CANCEL_REASON, abortReasonError);
  }

  /** What `throwIfCancelled()` throws (never throws itself, whatever the reason: invariant 6). */
  abortReason(): CancelledError {
    return this.#buildReason(this.#reason, cancelledError);
  }

  /** The error of a cancel of this token with `reason`, built by `make` (reasons.ts). */
  #buildReason(reason: unknown, make: typeof cancelledError): CancelledError {
    return cancelReason(reason, this.sessionId, this.turnId, make);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.isCancelled()) this.#controller.abort(this.#reasonOnCancel());
      else this.#prepareDefaultReason();
    }
    return this.#controller.signal;
  }

  /**
   * The handle is about to leave this thread: from now on a cancel may come from elsewhere.
   * `sleepers: false` when whoever gets it can only cancel through it, never wait on it (a pool
   * task's view of its turn's root, which serves `cancelTurn()` alone): the bridge then watches
   * the slot, but a cancel made here still wakes nobody on it.
   */
  exportSlot(sleepers = true): SlotRef {
    // Once is enough (a pool exports on every run): a child made later clears `wakeOnFlip` itself.
    if (sleepers && !this.#exported) {
      this.#exported = true;
      this.slot.wakeOnFlip = this.#children === undefined;
    }
    if (!this.#watched && !this.#cancelled && !this.#retired) {
      this.#watched = true;
      watch(this, this.host.counters);
      this.#prepareDefaultReason();
    }
    return this.slot;
  }

  #unwatch(): void {
    if (!this.#watched) return;
    this.#watched = false;
    unwatch(this);
  }

  child(): TokenState {
    if (this.#retired) {
      throw new CancelledError(`cannot make a child of a retired token (turn ${this.turnId ?? '(none)'} of session ${this.sessionId} has ended)`, {
        reason: this.#reason, sessionId: this.sessionId, turnId: this.turnId,
      });
    }
    return new TokenState(this.host, this.sessionId, this.turnId, this, undefined);
  }

  /**
   * Adopt a caller-owned controller as this token's: aborting it cancels the token (with the
   * controller's reason, kept as given), and cancelling the token aborts it. Call right after
   * construction, before anything else has read `signal`.
   */
  adopt(controller: AbortController): void {
    this.#controller = controller;
    const onAbort = () => this.cancel(controller.signal.reason ?? DEFAULT_CANCEL_REASON);
    if (controller.signal.aborted) return void onAbort();
    controller.signal.addEventListener('abort', onAbort, { once: true });
    this.#detachAdopted = () => controller.signal.removeEventListener('abort', onAbort);
  }

  /** Invariants 2 and 5: children first, then this token's slot, bridge, listener and owners. */
  retire(): void {
    if (this.#retired) return;
    // From here on no other thread can cancel this slot; one that already did is folded in next.
    sealSlot(this.slot.cells, this.slot.index, this.slot.generation);
    this.#syncFromSlot();
    // That sync may have folded in a cancel from another thread and run abort listeners, and a
    // listener may already have retired this token (e.g. by ending the turn or beginning the
    // session's next one). Retire once (invariant 2): freeing the cell twice would push it onto
    // the free list twice and overwrite its next owner's word with this token's RETIRED(g), so
    // the next two claims would share one slot and one generation.
    if (this.#retired) return;
    if (this.#children !== undefined) for (const child of [...this.#children]) child.retire();
    this.#retired = true;
    this.#unwatch();
    this.host.slabs.retireAndFree(this.slot);
    this.host.counters.tokens--;
    this.#detachAdopted?.();
    this.#detachAdopted = undefined;
    if (this.#parent !== undefined) this.#parent.#children?.delete(this);
    this.#parent = undefined;
    if (this.#ownersHead !== undefined) for (const owner of this.#ownOwners([])) owner.onRetire?.();
    const onRetired = this.#onRetired;
    this.#onRetired = undefined;
    onRetired?.(this);
  }

  /** Register the owner `entry` stands for (invariant 5: counted until `removeOwner`); a second call does nothing. */
  addOwner(entry: OwnerEntry): void {
    if (entry.ownerLinked) return;
    entry.ownerLinked = true;
    entry.ownerPrev = this.#ownersTail;
    entry.ownerNext = undefined;
    if (this.#ownersTail === undefined) this.#ownersHead = entry;
    else this.#ownersTail.ownerNext = entry;
    this.#ownersTail = entry;
    this.host.counters.owners++;
  }

  /** Remove `entry` (added to this token); a second call does nothing. */
  removeOwner(entry: OwnerEntry): void {
    if (!entry.ownerLinked) return;
    entry.ownerLinked = false;
    const { ownerPrev: prev, ownerNext: next } = entry;
    if (prev === undefined) this.#ownersHead = next;
    else prev.ownerNext = next;
    if (next === undefined) this.#ownersTail = prev;
    else next.ownerPrev = prev;
    entry.ownerPrev = entry.ownerNext = undefined;
    this.host.counters.owners--;
  }

  /** Push every owner of this token and of its descendants onto `out`. */
  collectOwners(out: TreeMember[]): TreeMember[] {
    this.#ownOwners(out);
    if (this.#children !== undefined) for (const child of this.#children) child.collectOwners(out);
    return out;
  }

  /** The one public facade of this state, made by `make` on first use. */
  facade<T extends object>(make: (state: TokenState) => T): T {
    return (this.#facade ??= make(this)) as T;
  }
}
