/**
 * How many stops for turns that have not started one client may have kept at once. A stop named
 * by a turn id nobody runs yet is kept until that turn starts (the page's Stop pressed before its
 * Send landed), so a client could otherwise fill the runner's and the fleet's books with made-up
 * turn ids. The runner and the fleet bound their books per session, so such a flood never evicts
 * another user's stop; this bound keeps one client from taking every session's room too: past it
 * the server refuses the client's next kept stop (429) instead of passing it on.
 *
 * A client is its remote address (behind a reverse proxy, every user shares the proxy's: set the
 * bound with that in mind). A kept stop stops counting when its turn starts through this instance
 * (its Send lands here, or the runner starts it here), or when it expires (the runner's
 * `pendingStopMs`): with a fleet, a stop whose turn started on another instance counts here until
 * then. Each operation is O(1) but the pruning of expired stops, which is amortised: a client's
 * stops live the same time, so insertion order is expiry order.
 */

/** Kept stops one client may have at once. */
export const MAX_KEPT_STOPS_PER_CLIENT = 100;
/** Clients tracked at once; past it the least recently seen one is forgotten (with its stops). */
const MAX_CLIENTS = 1000;

/** The kept stops of every client; see the file comment. */
export class ClientStops {
  readonly #ttlMs: number;
  /** Per client (least recently seen first): its kept stops (session and turn) and their expiry (performance.now()). */
  readonly #clients = new Map<string, Map<string, number>>();
  /** Which client kept the stop for a (session, turn). */
  readonly #owners = new Map<string, string>();

  /** @param ttlMs how long a kept stop waits for its turn (the runner's `pendingStopMs`). */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** True when `client` may have one more stop kept. */
  hasRoom(client: string): boolean {
    const kept = this.#clients.get(client);
    if (kept === undefined) return true;
    this.#prune(kept);
    return kept.size < MAX_KEPT_STOPS_PER_CLIENT;
  }

  /** Counts the stop kept for `client` for the session's turn `turnId`. */
  kept(client: string, sessionId: string, turnId: string): void {
    const key = keyOf(sessionId, turnId);
    if (this.#owners.has(key)) return; // a repeat is the same kept stop
    let kept = this.#clients.get(client);
    if (kept === undefined) kept = new Map();
    // Map order is recency order: the client moves to the end.
    this.#clients.delete(client);
    this.#clients.set(client, kept);
    kept.set(key, performance.now() + this.#ttlMs);
    this.#owners.set(key, client);
    if (this.#clients.size > MAX_CLIENTS) this.#forget(this.#clients.keys().next().value!);
  }

  /** The turn started (its kept stop, if any, was taken): it no longer counts. */
  started(sessionId: string, turnId: string): void {
    const key = keyOf(sessionId, turnId);
    const client = this.#owners.get(key);
    if (client === undefined) return;
    this.#owners.delete(key);
    this.#clients.get(client)?.delete(key);
  }

  #prune(kept: Map<string, number>): void {
    const now = performance.now();
    for (const [key, expiresAt] of kept) {
      if (expiresAt > now) return;
      kept.delete(key);
      this.#owners.delete(key);
    }
  }

  #forget(client: string): void {
    for (const key of this.#clients.get(client)?.keys() ?? []) this.#owners.delete(key);
    this.#clients.delete(client);
  }
}

/** One key per (sessionId, turnId) pair (JSON keeps the boundary). */
function keyOf(sessionId: string, turnId: string): string {
  return JSON.stringify([sessionId, turnId]);
}
