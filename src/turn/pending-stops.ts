/**
 * Stops that arrived before their turn (docs/design.md, "Stop before start"): a user pressed Stop
 * in the gap between sending a message and the server opening its turn. Kept per (sessionId,
 * turnId) for a fixed time, taken once by that turn's `run`, which then starts nothing of its body.
 *
 * Every entry lives the same `ttlMs`, so insertion order is expiry order: expired entries are
 * dropped from the front as the map is used, with no timer. The map is capped (`MAX_PENDING_STOPS`),
 * oldest dropped first, so stops for made-up turn ids cannot grow it without bound.
 */

/** The most pending stops kept at once; past it the oldest is dropped. */
const MAX_PENDING_STOPS = 10_000;

/** What a pending stop keeps for its turn. */
export interface PendingStop {
  /** The stop's reason code. */
  readonly reason: string;
}

interface Entry extends PendingStop {
  /** performance.now() past which the stop is forgotten. */
  readonly expiresAt: number;
}

export class PendingStops {
  readonly #ttlMs: number;
  readonly #entries = new Map<string, Entry>();

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** Keep `stop` for the turn; a repeat keeps the first (its reason, its expiry), as a repeat stop joins the first. */
  add(sessionId: string, turnId: string, stop: PendingStop): void {
    const now = performance.now();
    this.#dropExpired(now);
    const key = keyOf(sessionId, turnId);
    if (this.#entries.has(key)) return;
    if (this.#entries.size >= MAX_PENDING_STOPS) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { reason: stop.reason, expiresAt: now + this.#ttlMs });
  }

  /** The turn's pending stop, removed; `undefined` when there is none (or it expired). */
  take(sessionId: string, turnId: string): PendingStop | undefined {
    this.#dropExpired(performance.now());
    const key = keyOf(sessionId, turnId);
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    return { reason: entry.reason };
  }

  #dropExpired(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt > now) return;
      this.#entries.delete(key);
    }
  }
}

/** One key per (sessionId, turnId) pair, with no pair sharing another's (JSON keeps the boundary). */
function keyOf(sessionId: string, turnId: string): string {
  return JSON.stringify([sessionId, turnId]);
}
