/**
 * One session's feed from one store: the entries that reach the store after its live streams'
 * position, read once for all of them and handed to each, in `seq` order. It reads when the
 * runner says the session wrote something (`wake`) and, for the entries other instances commit,
 * every `pollMs` while a stream is live (at most `POLL_READS` polls of the process at a time).
 *
 * Invariants:
 * 1. `#cursor` is the `seq` of the newest entry handed to the live clients; every entry of the
 *    session with a `seq` up to it was handed to every client live at that moment. The cursor
 *    moves and the entry is handed out in one synchronous step, so no client can join in between.
 * 2. A client joins the live set only when it already has every entry up to `#cursor`
 *    (`goLive`: its own cursor is not behind); otherwise it reads the store again itself. So a
 *    joining client misses nothing, and what it gets twice it skips by `seq` (its own cursor).
 * 3. One read at a time: a wake during a read makes the read go round once more, or a new read
 *    start as the read ends (never lost, never two reads racing to move the cursor). A store that
 *    pages by `afterSeq` in commit order (the `LedgerStore` promise 7; PgLedger's `seq` is commit
 *    order) then skips nothing.
 * 4. With no live client the cursor is forgotten (`undefined`) and nothing is read or polled.
 */

import type { LedgerEntry } from '../ledger/entry.js';
import type { LedgerStore } from '../ledger/store.js';
import { entryFrame } from './frames.js';

/** Entries one read takes at most; a full page is followed by the next at once. */
export const PAGE_ENTRIES = 500;
/** Polls of the store running at once in this process, all feeds together (a bound on the store's load). */
export const POLL_READS = 4;

/** A stream as the feed sees it. */
export interface FeedClient {
  /** The `seq` of the newest entry the client has (0: none). */
  readonly cursor: number;
  /** An entry of the session, in `seq` order; the client skips one it has. */
  entry(entry: LedgerEntry, frame: Uint8Array): void;
  /** A live-only frame (progress, a question, a ping). */
  live(frame: Uint8Array): void;
}

/** Runs at most `n` tasks at a time, the rest in call order. */
export class Limiter {
  #running = 0;
  readonly #queue: (() => void)[] = [];
  constructor(readonly n: number) {}

  async run(task: () => Promise<void>): Promise<void> {
    if (this.#running >= this.n) await new Promise<void>((resolve) => this.#queue.push(resolve));
    this.#running++;
    try {
      await task();
    } finally {
      this.#running--;
      this.#queue.shift()?.();
    }
  }
}

/** See the file comment. */
export class SessionFeed {
  /** Every client, catching up or live: the feed lives while one is here. */
  readonly clients = new Set<FeedClient>();
  readonly #live = new Set<FeedClient>();
  /** Invariant 1; `undefined`: no client is live (invariant 4). */
  #cursor: number | undefined;
  /** The read under way (invariant 3); `undefined` between reads. */
  #reading: Promise<void> | undefined;
  #again = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** Reads that failed (the next wake or poll tries again). */
  readFailures = 0;

  constructor(
    readonly store: LedgerStore,
    readonly sessionId: string,
    /** Poll period in ms; 0: no polling (only this runner writes the store). */
    public pollMs: number,
    readonly limiter: Limiter,
  ) {}

  /** Invariant 2: true when `client` joined the live set; false when it must read further first. */
  goLive(client: FeedClient): boolean {
    if (this.#cursor === undefined) this.#cursor = client.cursor;
    else if (this.#cursor > client.cursor) return false;
    this.#live.add(client);
    // What was committed since the client's last read and woke no one (no client was live) is read now.
    this.wake();
    this.#schedule();
    return true;
  }

  /** True while a poll is armed. */
  get polling(): boolean {
    return this.#timer !== undefined;
  }

  /** Removes `client` (its stream ended). */
  remove(client: FeedClient): void {
    this.clients.delete(client);
    this.#live.delete(client);
    if (this.#live.size === 0) this.#cursor = undefined; // invariant 4
  }

  /** The session wrote to the store (or a poll is due): read what is new, now or right after the read under way. */
  wake(): void {
    if (this.#cursor === undefined || this.#closed) return;
    if (this.#reading !== undefined) {
      this.#again = true;
      return;
    }
    this.#reading = this.#readLoop().finally(() => {
      this.#reading = undefined;
      // A wake after the loop's last look and before this (a runner event in the microtasks between) goes round now.
      if (this.#again) this.wake();
      this.#schedule();
    });
  }

  /** A live-only frame to every live client. */
  live(frame: Uint8Array): void {
    for (const client of [...this.#live]) client.live(frame);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async #readLoop(): Promise<void> {
    do {
      this.#again = false;
      const after = this.#cursor;
      if (after === undefined) return;
      let page: LedgerEntry[];
      try {
        page = await this.store.entries({ sessionId: this.sessionId, afterSeq: after, limit: PAGE_ENTRIES });
      } catch {
        this.readFailures++;
        return; // the next wake or poll reads again from the same cursor
      }
      if (this.#closed) return;
      if (this.#cursor !== after) {
        // Invariant 4: the live set emptied (and maybe refilled from another cursor) meanwhile: read from there.
        this.#again = true;
        continue;
      }
      for (const entry of page) {
        if (entry.seq <= this.#cursor) continue;
        this.#cursor = entry.seq; // invariant 1: moved and handed out in one step
        const frame = entryFrame(entry);
        for (const client of [...this.#live]) client.entry(entry, frame);
      }
      if (page.length === PAGE_ENTRIES) this.#again = true;
    } while (this.#again && !this.#closed);
  }

  /** The next poll, `pollMs` after this moment, while a client is live. */
  #schedule(): void {
    if (this.#closed || this.pollMs === 0 || this.#live.size === 0 || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.limiter.run(async () => {
        this.wake();
        await this.#reading;
      });
    }, this.pollMs);
    this.#timer.unref?.();
  }
}
