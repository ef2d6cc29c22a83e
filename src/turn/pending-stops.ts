/**
 * Stops that arrived before their turn (docs/design.md, "Stop before start"): a user pressed Stop
 * in the gap between sending a message and the server opening its turn. Kept per (sessionId,
 * turnId) for a fixed time, taken once by that turn's `run`, which then starts nothing of its body.
 *
 * Invariants:
 * 1. A kept stop is never dropped for another's sake: only its expiry or its `take` removes it.
 *    The book is bounded by refusing new stops (per session, then in all), so one client's flood
 *    of made-up turn ids can fill the book but never erase a user's stop already kept.
 * 2. Every operation is O(1) (amortised over expiries): entries live on a list in insertion order,
 *    which is expiry order (every entry lives the same `ttlMs`), so expired ones are unlinked from
 *    its front as the book is used, with no timer and no scan; a `take` unlinks its entry in place.
 */

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

interface Entry extends PendingStop {
  readonly sessionId: string;
  readonly turnId: string;
  /** performance.now() past which the stop is forgotten (monotonic; `expiresAt` is for readers). */
  readonly deadline: number;
  prev: Entry | undefined;
  next: Entry | undefined;
}

export class PendingStops {
  readonly #ttlMs: number;
  readonly #perSession: number;
  readonly #total: number;
  /** sessionId → turnId → entry; a session's map is removed with its last entry. */
  readonly #sessions = new Map<string, Map<string, Entry>>();
  #size = 0;
  /** The oldest entry (next to expire) and the newest; both `undefined` when the book is empty. */
  #head: Entry | undefined;
  #tail: Entry | undefined;

  constructor(ttlMs: number, perSession: number, total: number) {
    this.#ttlMs = ttlMs;
    this.#perSession = perSession;
    this.#total = total;
  }

  /** How many stops are kept now (expired ones are forgotten first). */
  get size(): number {
    this.#dropExpired(performance.now());
    return this.#size;
  }

  /**
   * Keep a stop for the turn; a repeat keeps the first (its reason, grace and expiry), as a repeat
   * stop joins the first. Refused, changing nothing, when the session or the book is full.
   */
  add(sessionId: string, turnId: string, stop: { reason: string; graceMs: number }): AddResult {
    if (this.#ttlMs === 0) return { refused: 'disabled' };
    const now = performance.now();
    this.#dropExpired(now);
    const turns = this.#sessions.get(sessionId);
    const first = turns?.get(turnId);
    if (first !== undefined) return { kept: copyOf(first) };
    if ((turns?.size ?? 0) >= this.#perSession) return { refused: 'session_full' };
    if (this.#size >= this.#total) return { refused: 'book_full' };
    const entry: Entry = {
      sessionId, turnId, reason: stop.reason, graceMs: stop.graceMs,
      expiresAt: Date.now() + this.#ttlMs, deadline: now + this.#ttlMs, prev: this.#tail, next: undefined,
    };
    if (this.#tail === undefined) this.#head = entry;
    else this.#tail.next = entry;
    this.#tail = entry;
    (turns ?? this.#sessions.set(sessionId, new Map()).get(sessionId)!).set(turnId, entry);
    this.#size += 1;
    return { kept: copyOf(entry) };
  }

  /** The turn's pending stop, removed; `undefined` when there is none (or it expired). */
  take(sessionId: string, turnId: string): PendingStop | undefined {
    this.#dropExpired(performance.now());
    const entry = this.#sessions.get(sessionId)?.get(turnId);
    if (entry === undefined) return undefined;
    this.#remove(entry);
    return copyOf(entry);
  }

  #dropExpired(now: number): void {
    while (this.#head !== undefined && this.#head.deadline <= now) this.#remove(this.#head);
  }

  /** Unlink `entry` from the list and its session's map (invariant 2: O(1)). */
  #remove(entry: Entry): void {
    if (entry.prev === undefined) this.#head = entry.next;
    else entry.prev.next = entry.next;
    if (entry.next === undefined) this.#tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.prev = entry.next = undefined;
    const turns = this.#sessions.get(entry.sessionId)!;
    turns.delete(entry.turnId);
    if (turns.size === 0) this.#sessions.delete(entry.sessionId);
    this.#size -= 1;
  }
}

function copyOf({ reason, graceMs, expiresAt }: PendingStop): PendingStop {
  return { reason, graceMs, expiresAt };
}
