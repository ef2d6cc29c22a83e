/**
 * `CancelToken`: the one object every layer of a turn checks. A thin facade over `TokenState`
 * (state.ts), where the rules live; each method here is one call into it, except that `cancel()`
 * makes its first step (the slot's flip, `flipSlot` in state.ts) itself before that call.
 */

import { inspect as utilInspect } from 'node:util';
import type { SlotRef } from './slab.js';
import type { TokenHandle } from './slot.js';
import { DEFAULT_CANCEL_REASON } from './reasons.js';
import { TokenState } from './state.js';

// The engine's state and slot ride on each token under symbol keys no package entry exports, not
// declared on the class (no .d.ts names them; `Object.keys` and JSON show nothing). Not `#private`
// fields or a WeakMap: a method called through a Proxy of the token (a reactive store's) gets the
// proxy as `this`, and must still find them through it.
/** Key of a token's engine state; fullstop's own modules read it with `tokenState`. */
const STATE: unique symbol = Symbol('fullstop.tokenState');
/** Key of a token's slot ref, for `cancel()`'s first step. */
const SLOT: unique symbol = Symbol('fullstop.tokenSlot');
/** What a token holds under its keys. */
interface Engine { readonly [STATE]: TokenState; readonly [SLOT]: SlotRef }
/** Node's key for a custom `util.inspect` (a registered symbol: no import of node:util needed). */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/**
 * A turn's cancel token. Made by `TurnRegistry.beginTurn` (or `token.child()`), never with `new`.
 *
 * @example
 * const token = turns.beginTurn('session-1');
 * try { await fetch(url, { signal: token.signal }) } finally { turns.endTurn('session-1', token) }
 */
/** Set by the class below: true for a real `CancelToken`, whatever traps a lookalike has. */
let hasTokenBrand: (value: object) => boolean;

export class CancelToken {
  // A brand check (`#brand in value`) runs no code of the value, unlike `instanceof`, which
  // calls a Proxy's getPrototypeOf trap and throws for a revoked one.
  static {
    hasTokenBrand = (value) => #brand in value;
  }
  #brand(): void {}

  /**
   * Tokens come from `TurnRegistry.beginTurn` or `token.child()`; `new` is refused. The slot
   * (`[SLOT]`) is kept current by the state (`wakeOnFlip`): what `cancel()` flips first.
   */
  constructor(state: never) {
    if (!((state as unknown) instanceof TokenState)) {
      throw new TypeError('CancelToken: tokens are made by TurnRegistry.beginTurn() or token.child(), not with new');
    }
    // Plain assignments: `Object.defineProperty` (to hide them from a spread) costs ~250 ns each,
    // and doubled the time of a turn's token (beginTurn + child + cancel + endTurn).
    const engine = this as unknown as { [STATE]: TokenState; [SLOT]: SlotRef };
    engine[STATE] = state as TokenState;
    engine[SLOT] = (state as TokenState).slot;
  }

  /** The session this token's turn belongs to. */
  get sessionId(): string { return tokenState(this).sessionId; }
  /** The turn's id as given to `beginTurn`, or `undefined` when none was given. */
  get turnId(): string | undefined { return tokenState(this).turnId; }
  /** Aborts (once) when the token is cancelled, from this or any other thread; its reason is a `CancelledError`. */
  get signal(): AbortSignal { return tokenState(this).signal; }
  /** True once retired; a retired token can no longer be cancelled. */
  get retired(): boolean { return tokenState(this).retired; }
  /**
   * What `cancel()` was given, kept as given whatever it is (default `'cancel.user'`;
   * `'cancel.parent'` for a cancel inherited from the parent; `undefined` while running).
   */
  get reason(): unknown {
    const state = tokenState(this);
    state.isCancelled(); // reads the slot first: a cancel from another thread sets the reason
    return state.reason;
  }
  /** Structured-clonable `{ buffer, index, generation }` for other threads (`tokenFromHandle`). */
  get handle(): TokenHandle {
    const { slab, index, generation } = tokenState(this).exportSlot();
    return { buffer: slab.buffer, index, generation };
  }

  /** Cancel this token and its children. `false` once retired, `true` otherwise (idempotent; the first reason wins). */
  cancel(reason?: unknown): boolean {
    // `flipSlot` inlined, so the flip (and a leaf's wake) is the first thing this call does: on a
    // main thread gone cold, every call and object fetched before it is time the woken worker
    // waits (measured on bench row P1). The state does the rest.
    const slot = (this as unknown as Engine)[SLOT];
    const flipped = Atomics.compareExchange(slot.cells, slot.index, slot.runningWord, slot.cancelledWord) === slot.runningWord;
    if (flipped && slot.wakeOnFlip) Atomics.notify(slot.cells, slot.index);
    return tokenState(this).cancelFlipped(reason ?? DEFAULT_CANCEL_REASON, flipped);
  }
  /** True once cancelled, from this or any other thread; a retired token keeps what it was. */
  isCancelled(): boolean { return tokenState(this).isCancelled(); }
  /** Throws a `CancelledError` carrying the reason if the token is cancelled. */
  throwIfCancelled(): void {
    const state = tokenState(this);
    if (state.isCancelled()) throw state.abortReason();
  }
  /** A token cancelled with this one (never the other way round) and retired with it. */
  child(): CancelToken { return wrap(tokenState(this).child()); }
  /** One-way: gives back the slot, stops watching for cancels from other threads, detaches listeners, retires children; a later `cancel()` returns false. */
  retire(): void { tokenState(this).retire(); }

  /**
   * What `console.log(token)` shows: its session, turn, state and reason, not the engine behind
   * it. The state is read from the slot, so printing a token folds in no cancel from another thread
   * and runs no abort listener.
   */
  [INSPECT](depth: number, options: object, inspect: (value: unknown, options?: object) => string): string {
    if (depth < 0) return '[CancelToken]';
    const { sessionId, turnId, reason } = tokenState(this);
    const slot = (this as unknown as Engine)[SLOT];
    const word = Atomics.load(slot.cells, slot.index);
    const state = word === slot.runningWord ? 'running' : word === slot.cancelledWord ? 'cancelled' : 'retired';
    const fields = [`sessionId: ${inspect(sessionId)}`, `turnId: ${inspect(turnId)}`, `state: '${state}'`];
    if (reason !== undefined) fields.push(`reason: ${inspect(reason, options)}`);
    return `CancelToken { ${fields.join(', ')} }`;
  }

  /** What `console.log(token)` shows, for `String(token)` and template literals. */
  toString(): string {
    return utilInspect(this);
  }
}

const makeFacade = (state: TokenState) => new CancelToken(state as never);

/** The engine state of `token` (for the token modules; not exported from a package entry). */
export function tokenState(token: CancelToken): TokenState {
  return (token as unknown as Engine)[STATE];
}

/** The facade of a state (one per state, made on first use; not exported from a package entry). */
export function wrap(state: TokenState): CancelToken {
  return state.facade(makeFacade);
}

/** True for a `CancelToken` of this copy of the library (not exported from a package entry). */
export function isCancelToken(value: unknown): value is CancelToken {
  return typeof value === 'object' && value !== null && hasTokenBrand(value);
}
