/**
 * `TurnRegistry`: which token is the current turn of each session.
 *
 * The rule that keeps a late stop out of the next turn lives here: a session has at most one
 * current token; `beginTurn` retires a leftover before making the next; every stop-like call
 * (`markCancelled`, `isCancelled`) acts on the current token only, and `endTurn(s, token)` retires
 * that token alone, never a successor that took its place.
 */

import { checkId, describe } from '../errors.js';
import { MAX_SLOTS_PER_SLAB, SlabSet } from './slab.js';
import type { TokenHost } from './host.js';
import { TokenState } from './state.js';
import { CancelToken, isCancelToken, tokenState, wrap } from './token.js';

export interface TurnRegistryOptions {
  /**
   * Slots per SharedArrayBuffer slab, from 1 to 2^20. A full slab is never a limit on live
   * tokens: another is added.
   * @default 1024
   */
  slots?: number;
}

export interface RegistryStats {
  /** Tokens not yet retired (roots and children). */
  liveTokens: number;
  /** Slots owned by a live token. */
  liveSlots: number;
  /** Armed `Atomics.waitAsync` bridges (invisible to `process.getActiveResourcesInfo()`). */
  liveBridges: number;
  /** Work registered under a token (pool tasks, exec children, questions) not yet settled. */
  liveOwners: number;
}

const DEFAULT_SLOTS = 1024;

/**
 * @example
 * const registry = new TurnRegistry();
 * const token = registry.beginTurn('s1', 'turn-1');
 * stopButton.onclick = () => registry.markCancelled('s1');
 * try { await work(token) } finally { registry.endTurn('s1', token) }
 */
export class TurnRegistry {
  readonly #slabs: SlabSet;
  /** What this registry's tokens claim slots from and count themselves in. */
  readonly #host: TokenHost;
  /** The current token of each session; a session between turns has no entry. */
  readonly #current = new Map<string, TokenState>();
  readonly #forget = (state: TokenState) => {
    if (this.#current.get(state.sessionId) === state) this.#current.delete(state.sessionId);
  };

  /** @throws {RangeError} when `options.slots` is not an integer from 1 to 2^20. */
  constructor(options: TurnRegistryOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options: expected an object, got ${describe(options)}`);
    }
    const slots = options.slots ?? DEFAULT_SLOTS;
    // Checked here rather than at the first beginTurn: a slab is allocated whole, and one too
    // large to allocate would end the process there instead of failing this call.
    if (typeof slots !== 'number' || !Number.isInteger(slots) || slots < 1 || slots > MAX_SLOTS_PER_SLAB) {
      throw new RangeError(`options.slots: expected an integer from 1 to ${MAX_SLOTS_PER_SLAB} (slots per slab; a full slab adds another), got ${describe(slots)}`);
    }
    this.#slabs = new SlabSet(slots);
    this.#host = { slabs: this.#slabs, counters: { tokens: 0, bridges: 0, owners: 0 } };
  }

  /** Open the session's turn. A leftover token of the session is retired first. */
  beginTurn(sessionId: string, turnId?: string): CancelToken {
    checkId('sessionId', sessionId);
    if (turnId !== undefined) checkId('turnId', turnId);
    this.#current.get(sessionId)?.retire();
    return this.#install(new TokenState(this.#host, sessionId, turnId, undefined, this.#forget));
  }

  /** End the session's turn. With `token`: retire that one only, never a successor. */
  endTurn(sessionId: string, token?: CancelToken): void {
    checkId('sessionId', sessionId);
    if (token === undefined) return this.#current.get(sessionId)?.retire();
    this.#checkToken(token, sessionId);
    tokenState(token).retire();
  }

  /** The session's running turn, or undefined between turns. */
  currentToken(sessionId: string): CancelToken | undefined {
    checkId('sessionId', sessionId);
    const state = this.#current.get(sessionId);
    return state === undefined ? undefined : wrap(state);
  }

  /** Cancel the session's running turn. No-op (false) between turns. */
  markCancelled(sessionId: string, reason?: unknown): boolean {
    checkId('sessionId', sessionId);
    return this.#current.get(sessionId)?.cancel(reason ?? 'cancel.session') ?? false;
  }

  /** Whether the session's running turn is cancelled; false as soon as the turn ends. */
  isCancelled(sessionId: string): boolean {
    checkId('sessionId', sessionId);
    return this.#current.get(sessionId)?.isCancelled() ?? false;
  }

  /** Retire the session's token (compat name for `endTurn(sessionId)`). */
  clearCancel(sessionId: string): void {
    this.endTurn(sessionId);
  }

  /**
   * Adopt a caller-owned controller as the session's turn token: aborting the controller cancels
   * the token and cancelling the token aborts the controller. Retires the previous token.
   */
  registerCancelEvent(sessionId: string, controller: AbortController): CancelToken {
    checkId('sessionId', sessionId);
    if (!(controller instanceof AbortController)) {
      throw new TypeError(`controller: expected an AbortController, got ${describe(controller)}`);
    }
    this.#current.get(sessionId)?.retire();
    const state = new TokenState(this.#host, sessionId, undefined, undefined, this.#forget);
    state.adopt(controller);
    return this.#install(state);
  }

  /** Block every `checkpoint()` of this registry's tokens until `resume()` (a stop still wakes them). */
  pause(): void { this.#slabs.setPaused(true); }
  /** Let every `checkpoint()` blocked by `pause()` go on. */
  resume(): void { this.#slabs.setPaused(false); }
  /** True between `pause()` and `resume()`. */
  get paused(): boolean { return this.#slabs.paused; }

  /** Live resources of this registry; all four are zero once every turn has ended. */
  stats(): RegistryStats {
    const { counters } = this.#host;
    return { liveTokens: counters.tokens, liveSlots: this.#slabs.live, liveBridges: counters.bridges, liveOwners: counters.owners };
  }

  #install(state: TokenState): CancelToken {
    // Retiring the leftover can run abort listeners (a cancel from another thread is folded in at
    // retire), and one may have begun a turn of this session in the meantime. That turn is a
    // leftover too: retire it rather than orphan it, still live, behind this one.
    const other = this.#current.get(state.sessionId);
    if (other !== undefined && other !== state) other.retire();
    this.#current.set(state.sessionId, state);
    return wrap(state);
  }

  #checkToken(token: unknown, sessionId: string): asserts token is CancelToken {
    if (!isCancelToken(token)) throw new TypeError(`token: expected a CancelToken, got ${describe(token)}`);
    if (tokenState(token).host !== this.#host) throw new TypeError('token: belongs to another TurnRegistry');
    if (tokenState(token).sessionId !== sessionId) {
      throw new TypeError(`token: belongs to session ${JSON.stringify(tokenState(token).sessionId)}, not ${JSON.stringify(sessionId)}`);
    }
  }
}

/** The default registry: the one `runInSession`, `TurnRunner` and `TurnPool` use when given none. */
export const turns = new TurnRegistry();
