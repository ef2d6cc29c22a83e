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
 * 4. Every operation is O(1), amortised over expiries: entries live on a list in insertion order,
 *    which is expiry order (every entry lives the same `ttlMs`), unlinked from its front as the
 *    book is used, with no timer and no scan; a `take` unlinks its entry in place.
 */

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

interface Entry extends KeptStop {
  readonly key: string;
  readonly sessionId: string;
  /** performance.now() past which it is forgotten (monotonic; `expiresAt` is for the answer). */
  readonly deadline: number;
  prev: Entry | undefined;
  next: Entry | undefined;
}

/** The book; see the file comment. */
export class KeptStops {
  readonly #ttlMs: number;
  /** (sessionId, turnId) → entry. */
  readonly #entries = new Map<string, Entry>();
  /** sessionId → how many stops it keeps (a session is removed with its last one). */
  readonly #perSession = new Map<string, number>();
  /** Entries past their session's first (invariant 2). */
  #shared = 0;
  /** Oldest (next to expire) and newest entry; both `undefined` when the book is empty. */
  #head: Entry | undefined;
  #tail: Entry | undefined;

  /** @param ttlMs how long a stop waits for its turn (the runner's `pendingStopMs`; 0 keeps none). */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** Stops kept now. */
  get size(): number {
    this.#dropExpired(performance.now());
    return this.#entries.size;
  }

  /** Why a stop for the session's turn `turnId` could not be kept now; `undefined` when it can (or is kept already). */
  refusal(sessionId: string, turnId: string): KeepRefusal | undefined {
    if (this.#ttlMs === 0) return 'disabled';
    this.#dropExpired(performance.now());
    if (this.#entries.has(keyOf(sessionId, turnId))) return undefined;
    const held = this.#perSession.get(sessionId) ?? 0;
    if (held >= MAX_KEPT_STOPS_PER_SESSION) return 'session_full';
    // Invariant 1: a session's first stop is measured against the memory bound only.
    if (held === 0) return this.#perSession.size >= MAX_SESSIONS_WITH_STOPS ? 'book_full' : undefined;
    return this.#shared >= MAX_SHARED_KEPT_STOPS ? 'book_full' : undefined;
  }

  /**
   * Keeps the stop (the caller asked `refusal` first); a repeat keeps the first one (its reason
   * and expiry), as a repeat stop joins the first.
   */
  add(sessionId: string, turnId: string, reason: string): KeptStop {
    const now = performance.now();
    this.#dropExpired(now);
    const key = keyOf(sessionId, turnId);
    const first = this.#entries.get(key);
    if (first !== undefined) return copyOf(first);
    const held = this.#perSession.get(sessionId) ?? 0;
    const entry: Entry = { key, sessionId, reason, expiresAt: Date.now() + this.#ttlMs, deadline: now + this.#ttlMs, prev: this.#tail, next: undefined };
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    this.#entries.set(key, entry);
    this.#perSession.set(sessionId, held + 1);
    if (held > 0) this.#shared += 1;
    return copyOf(entry);
  }

  /** The turn starts: its kept stop, removed; `undefined` when there is none (or it expired). */
  take(sessionId: string, turnId: string): KeptStop | undefined {
    this.#dropExpired(performance.now());
    const entry = this.#entries.get(keyOf(sessionId, turnId));
    if (entry === undefined) return undefined;
    this.#remove(entry);
    return copyOf(entry);
  }

  #dropExpired(now: number): void {
    while (this.#head !== undefined && this.#head.deadline <= now) this.#remove(this.#head);
  }

  /** Unlinks `entry` (invariant 4: O(1)). */
  #remove(entry: Entry): void {
    if (entry.prev === undefined) this.#head = entry.next;
    else entry.prev.next = entry.next;
    if (entry.next === undefined) this.#tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.prev = entry.next = undefined;
    this.#entries.delete(entry.key);
    const held = this.#perSession.get(entry.sessionId)! - 1;
    if (held === 0) this.#perSession.delete(entry.sessionId);
    else this.#perSession.set(entry.sessionId, held);
    // The shared count is the sum of (kept − 1) over sessions: whichever stop goes, it drops by
    // one unless that was the session's last.
    if (held > 0) this.#shared -= 1;
  }
}

/** One key per (sessionId, turnId) pair (JSON keeps the boundary). */
function keyOf(sessionId: string, turnId: string): string {
  return JSON.stringify([sessionId, turnId]);
}

function copyOf({ reason, expiresAt }: KeptStop): KeptStop {
  return { reason, expiresAt };
}
