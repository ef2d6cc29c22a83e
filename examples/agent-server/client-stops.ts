/**
 * How many stops for turns that have not started one client may have kept at once. A stop named
 * by a turn id nobody runs yet is kept until that turn starts (the page's Stop pressed before its
 * Send landed), so a client could otherwise fill the runner's and the fleet's books with made-up
 * turn ids. The runner and the fleet bound their books per session, so such a flood never evicts
 * another user's stop; this bound keeps one client from taking every session's room too: past it
 * the server refuses the client's next kept stop (429) instead of passing it on. A client is its
 * remote address (behind a reverse proxy, every user shares the proxy's: set the bound with that
 * in mind). Each stop is O(1): entries live the same time, so insertion order is expiry order.
 */

/** Kept stops one client may have at once. */
export const MAX_KEPT_STOPS_PER_CLIENT = 100;
/** Clients tracked at once; past it the one whose newest kept stop is oldest is forgotten. */
const MAX_CLIENTS = 10_000;

/** The kept stops of every client; see the file comment. */
export class ClientStops {
  readonly #ttlMs: number;
  /** Per client: its kept stops' expiry times (performance.now()), oldest first. */
  readonly #clients = new Map<string, number[]>();

  /** @param ttlMs how long a kept stop waits for its turn (the runner's `pendingStopMs`). */
  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  /** True when `client` may have one more stop kept. */
  hasRoom(client: string): boolean {
    return this.#live(client).length < MAX_KEPT_STOPS_PER_CLIENT;
  }

  /** Counts a stop kept for `client`. */
  kept(client: string): void {
    const live = this.#live(client);
    live.push(performance.now() + this.#ttlMs);
    // Map order is recency order: the client moves to the end.
    this.#clients.delete(client);
    this.#clients.set(client, live);
    if (this.#clients.size > MAX_CLIENTS) this.#clients.delete(this.#clients.keys().next().value!);
  }

  #live(client: string): number[] {
    const expiries = this.#clients.get(client);
    if (expiries === undefined) return [];
    const now = performance.now();
    let expired = 0;
    while (expired < expiries.length && expiries[expired] <= now) expired++;
    if (expired > 0) expiries.splice(0, expired);
    return expiries;
  }
}
