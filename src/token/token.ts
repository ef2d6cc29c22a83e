/**
 * `CancelToken`: the one object every layer of a turn checks. A thin facade over `TokenState`
 * (state.ts), where the rules live; each method here is one call into it, except that `cancel()`
 * makes its first step (the slot's flip, `flipSlot` in state.ts) itself before that call.
 */

import { inspect as utilInspect } from 'node:util';
import type { SlotRef } from './slab.js';
import type { TokenHandle } from './slot.js';
import { DEFAULT_CANCEL_REASON, TokenState } from './state.js';

/** @internal Key of a token's engine state (not exported from the package). */
export const STATE: unique symbol = Symbol('fullstop.tokenState');
/** @internal Key of a token's slot ref, for `cancel()`'s first step (not exported from the package). */
const SLOT: unique symbol = Symbol('fullstop.tokenSlot');
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
  /** @internal */
  readonly [STATE]: TokenState;
  // A brand check (`#brand in value`) runs no code of the value, unlike `instanceof`, which
  // calls a Proxy's getPrototypeOf trap and throws for a revoked one.
  static {
    hasTokenBrand = (value) => #brand in value;
  }
  #brand(): void {}

  /**
   * @internal The state's slot, kept current by the state (`wakeOnFlip`): what `cancel()` flips
   * before anything else. A symbol key, not a private field, like `[STATE]`: a method called
   * through a Proxy of the token (a reactive store's) reads it through the proxy.
   */
  readonly [SLOT]: SlotRef;

  /** @internal Tokens come from `TurnRegistry.beginTurn` or `token.child()`. */
  constructor(state: TokenState) {
    if (!(state instanceof TokenState)) {
      throw new TypeError('CancelToken: tokens are made by TurnRegistry.beginTurn() or token.child(), not with new');
    }
    this[STATE] = state;
    this[SLOT] = state.slot;
  }

  /** The session this token's turn belongs to. */
  get sessionId(): string { return this[STATE].sessionId; }
  /** The turn's id as given to `beginTurn`, or `undefined` when none was given. */
  get turnId(): string | undefined { return this[STATE].turnId; }
  /** Aborts (once) when the token is cancelled, from this or any other thread; its reason is a `CancelledError`. */
  get signal(): AbortSignal { return this[STATE].signal; }
  /** True once retired; a retired token can no longer be cancelled. */
  get retired(): boolean { return this[STATE].retired; }
  /**
   * What `cancel()` was given, kept as given whatever it is (default `'cancel.user'`;
   * `'cancel.parent'` for a cancel inherited from the parent; `undefined` while running).
   */
  get reason(): unknown { this[STATE].isCancelled(); return this[STATE].reason; }
  /** Structured-clonable `{ buffer, index, generation }` for other threads (`tokenFromHandle`). */
  get handle(): TokenHandle {
    const { slab, index, generation } = this[STATE].exportSlot();
    return { buffer: slab.buffer, index, generation };
  }

  /** Cancel this token and its children. `false` once retired, `true` otherwise (idempotent; the first reason wins). */
  cancel(reason?: unknown): boolean {
    // `flipSlot` inlined, so the flip (and a leaf's wake) is the first thing this call does: on a
    // main thread gone cold, every call and object fetched before it is time the woken worker
    // waits (measured on bench row P1). The state does the rest.
    const slot = this[SLOT];
    const flipped = Atomics.compareExchange(slot.cells, slot.index, slot.runningWord, slot.cancelledWord) === slot.runningWord;
    if (flipped && slot.wakeOnFlip) Atomics.notify(slot.cells, slot.index);
    return this[STATE].cancelFlipped(reason ?? DEFAULT_CANCEL_REASON, flipped);
  }
  /** True once cancelled, from this or any other thread; a retired token keeps what it was. */
  isCancelled(): boolean { return this[STATE].isCancelled(); }
  /** Throws a `CancelledError` carrying the reason if the token is cancelled. */
  throwIfCancelled(): void { if (this[STATE].isCancelled()) throw this[STATE].abortReason(); }
  /** A token cancelled with this one (never the other way round) and retired with it. */
  child(): CancelToken { return wrap(this[STATE].child()); }
  /** One-way: gives back the slot, stops watching for cancels from other threads, detaches listeners, retires children; a later `cancel()` returns false. */
  retire(): void { this[STATE].retire(); }

  /**
   * What `console.log(token)` shows: its session, turn, state and reason, not the engine behind
   * it. The state is read from the slot, so printing a token folds in no cancel from another thread
   * and runs no abort listener.
   */
  [INSPECT](depth: number, options: object, inspect: (value: unknown, options?: object) => string): string {
    if (depth < 0) return '[CancelToken]';
    const { sessionId, turnId, reason } = this[STATE];
    const slot = this[SLOT];
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

const makeFacade = (state: TokenState) => new CancelToken(state);


/** @internal The facade of a state (one per state, made on first use). */
export function wrap(state: TokenState): CancelToken {
  return state.facade(makeFacade);
}

/** @internal True for a `CancelToken` of this copy of the library. */
export function isCancelToken(value: unknown): value is CancelToken {
  return typeof value === 'object' && value !== null && hasTokenBrand(value);
}
