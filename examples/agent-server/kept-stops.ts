/**
 * The server's book of stops kept for turns that have not started: a Stop pressed before its
 * Send landed names a turn nobody runs yet, so the server keeps it until that turn starts (and
 * then starts the turn cancelled) or it expires. Without a fleet the stop itself lives here; with
 * one it lives in Redis (the fleet's) and this book only admits it.
 *
 * What a client can forge: its address (any 127.x reaches a loopback server; on the internet a
 * /64 of IPv6 addresses is one customer's), and any session id or turn id. What it cannot do is
 * know another user's session id: the page makes a random one (48 bits). So the book is bounded
 * per session, never per address, and a session's own first stop never competes with anyone's:
 *
 * Invariants:
 * 1. A session's first kept stop always has room: stops of other sessions never refuse it (up to
 *    `MAX_SESSIONS_WITH_STOPS` sessions holding one at once, a memory bound: other clients would
 *    have to send stops for that many sessions within one `ttlMs`, whatever addresses they use).
 * 2. A session keeps at most `MAX_KEPT_STOPS_PER_SESSION` stops; the stops past a session's first
 *    share `MAX_SHARED_KEPT_STOPS` among all sessions (those are the only ones a flood can crowd
 *    out, and a user needs them only for several Sends in flight at once).
 * 3. A kept stop is never dropped for another's sake: only its expiry or its turn starting removes
 *    it. Past a bound a new stop is refused, and the answer says so.
 * 4. Every operation is O(1), amortised over expiries, with no timer and no scan: the stops live in
 *    fullstop's `ExpiringBook` (src/base/expiring-book.ts), the runner's mechanism for its own
 *    pending stops; this file holds only the server's policy (which stop is refused, and why).
 */

import { ExpiringBook, type Expiring } from '../../src/base/expiring-book.js';

/** The most stops one session keeps at once (the runner's and the fleet's per-session bound). */
export const MAX_KEPT_STOPS_PER_SESSION = 100;
/** The most stops kept past their session's first, all sessions together (invariant 2). */
export const MAX_SHARED_KEPT_STOPS = 10_000;
/** The most sessions holding a kept stop at once: the memory bound of invariant 1 (391 bytes each with ids of 44 and 37 characters, 612 with 100-character ones). */
export const MAX_SESSIONS_WITH_STOPS = 250_000;

/** Why a stop cannot be kept: its session holds its most, the shared room (or the memory bound) is full, or keeping is off. */
export type KeepRefusal = 'session_full' | 'book_full' | 'disabled';

/** A kept stop. */
export interface KeptStop {
  /** The stop's reason code. */
  readonly reason: string;
  /** When it is forgotten, epoch ms. */
  readonly expiresAt: number;
}

/** The book; see the file comment. */
export class KeptStops {
  readonly #ttlMs: number;
  /** sessionId → turnId → the stop's reason. */
  readonly #book: ExpiringBook<string>;

  /** @param ttlMs how long a stop waits for its turn (the runner's `pendingStopMs`; 0 keeps none). */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
    this.#book = new ExpiringBook(ttlMs);
  }

  /** Stops kept now. */
  get size(): number {
    return this.#book.size;
  }

  /** Why a stop for the session's turn `turnId` could not be kept now; `undefined` when it can (or is kept already). */
  refusal(sessionId: string, turnId: string): KeepRefusal | undefined {
    if (this.#ttlMs === 0) return 'disabled';
    if (this.#book.get(sessionId, turnId) !== undefined) return undefined;
    const held = this.#book.held(sessionId);
    if (held >= MAX_KEPT_STOPS_PER_SESSION) return 'session_full';
    // Invariant 1: a session's first stop is measured against the memory bound only.
    if (held === 0) return this.#book.groups >= MAX_SESSIONS_WITH_STOPS ? 'book_full' : undefined;
    // Invariant 2: the stops past each session's first, all sessions together.
    return this.#book.size - this.#book.groups >= MAX_SHARED_KEPT_STOPS ? 'book_full' : undefined;
  }

  /**
   * Keeps the stop (the caller asked `refusal` first); a repeat keeps the first one (its reason
   * and expiry), as a repeat stop joins the first.
   */
  add(sessionId: string, turnId: string, reason: string): KeptStop {
    return stopOf(this.#book.add(sessionId, turnId, reason));
  }

  /** The turn starts: its kept stop, removed; `undefined` when there is none (or it expired). */
  take(sessionId: string, turnId: string): KeptStop | undefined {
    const kept = this.#book.take(sessionId, turnId);
    return kept === undefined ? undefined : stopOf(kept);
  }
}

function stopOf({ value, expiresAt }: Expiring<string>): KeptStop {
  return { reason: value, expiresAt };
}
