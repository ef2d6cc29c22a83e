/**
 * Stops that arrived before their turn (docs/design.md, "Stop before start"): a user pressed Stop
 * in the gap between sending a message and the server opening its turn. Kept per (sessionId,
 * turnId) for a fixed time, taken once by that turn's `run`, which then starts nothing of its body.
 *
 * Invariants:
 * 1. A kept stop is never dropped for another's sake: only its expiry or its `take` removes it.
 *    The book is bounded by refusing new stops (per session, then in all), so one client's flood
 *    of made-up turn ids can fill the book but never erase a user's stop already kept.
 * 2. Every operation is O(1) (amortised over expiries), with no timer and no scan: the stops live in
 *    an `ExpiringBook` (src/base/expiring-book.ts), the one mechanism of every kept stop.
 */

import { ExpiringBook, type Expiring } from '../base/expiring-book.js';

/** What a pending stop keeps for its turn. */
export interface PendingStop {
  /** The stop's reason code. */
  readonly reason: string;
  /** The stop's grace, in ms. */
  readonly graceMs: number;
  /** When it is forgotten, in epoch ms (`Date.now()`). */
  readonly expiresAt: number;
}

/** Why a stop could not be kept: its session holds its most, the book holds its most, or pending stops are off (`pendingStopMs: 0`). */
export type StopRefusal = 'session_full' | 'book_full' | 'disabled';

/** The answer of `add`: the stop kept (the first one, for a repeat), or why it was not. */
export type AddResult = { kept: PendingStop } | { refused: StopRefusal };

export class PendingStops {
  readonly #ttlMs: number;
  readonly #perSession: number;
  readonly #total: number;
  /** sessionId → turnId → the stop (the mechanism of invariant 2). */
  readonly #book: ExpiringBook<{ reason: string; graceMs: number }>;

  constructor(ttlMs: number, perSession: number, total: number) {
    this.#ttlMs = ttlMs;
    this.#perSession = perSession;
    this.#total = total;
    this.#book = new ExpiringBook(ttlMs);
  }

  /** How many stops are kept now (expired ones are forgotten first). */
  get size(): number {
    return this.#book.size;
  }

  /**
   * Keep a stop for the turn; a repeat keeps the first (its reason, grace and expiry), as a repeat
   * stop joins the first. Refused, changing nothing, when the session or the book is full.
   */
  add(sessionId: string, turnId: string, stop: { reason: string; graceMs: number }): AddResult {
    if (this.#ttlMs === 0) return { refused: 'disabled' };
    const first = this.#book.get(sessionId, turnId);
    if (first !== undefined) return { kept: stopOf(first) };
    if (this.#book.held(sessionId) >= this.#perSession) return { refused: 'session_full' };
    if (this.#book.size >= this.#total) return { refused: 'book_full' };
    return { kept: stopOf(this.#book.add(sessionId, turnId, { reason: stop.reason, graceMs: stop.graceMs })) };
  }

  /** The turn's pending stop, removed; `undefined` when there is none (or it expired). */
  take(sessionId: string, turnId: string): PendingStop | undefined {
    const kept = this.#book.take(sessionId, turnId);
    return kept === undefined ? undefined : stopOf(kept);
  }
}

function stopOf({ value, expiresAt }: Expiring<{ reason: string; graceMs: number }>): PendingStop {
  return { reason: value.reason, graceMs: value.graceMs, expiresAt };
}
