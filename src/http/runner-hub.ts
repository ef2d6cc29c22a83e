/**
 * The fan-out registry of one `TurnRunner`: one listener per event name on the runner, however many
 * streams are open (1,000 streams add no listener to the runner, so no `MaxListenersExceededWarning`),
 * and one `SessionFeed` per session and store, shared by that session's streams.
 *
 * Invariants:
 * 1. The runner holds this hub's listeners exactly while a stream is open: added with the first,
 *    removed with the last (`#attach`/`#detach`), so a runner with no stream has none of ours.
 * 2. A runner event of a session with history (`WAKE_EVENTS`: emitted after its entry is written)
 *    wakes that session's feeds, which read the entry from the store: the stream's order and ids
 *    are the store's, never the events'. Progress and questions (`LIVE_EVENTS`) are in no store:
 *    they go to the live streams as they come, without an id.
 */

import type { TurnRunner } from '../turn/runner.js';
import type { LedgerStore } from '../ledger/store.js';
import { liveFrame, PING_FRAME } from './frames.js';
import { Limiter, POLL_READS, SessionFeed } from './session-feed.js';

/** Events that follow an entry's write: the feed reads the store. */
const WAKE_EVENTS = ['turn_started', 'tool_call', 'tool_output', 'say', 'turn_completed', 'turn_failed', 'turn_aborted'] as const;
/** Events with no entry: sent to the live streams as they are. */
const LIVE_EVENTS = ['tool_progress', 'question'] as const;
/** A comment line this often on every live stream, so a proxy does not close an idle one. */
export const HEARTBEAT_MS = 15_000;

/** What `streamStats` says of a runner's streams. */
export interface StreamStats {
  /** Streams open now. */
  streams: number;
  /** Session feeds open now (one per session and store with a stream open). */
  feeds: number;
  /** Streams dropped so far because their client did not read (`maxBufferedBytes`). */
  dropped: number;
  /** Store reads of the feeds that failed so far (each is tried again at the next event or poll). */
  readFailures: number;
  /** Timers armed now: the heartbeat's and the feeds' polls (0 once every stream has ended). */
  timers: number;
}

type Payload = { sessionId: string };

/** See the file comment. */
export class RunnerHub {
  /** Feeds by session id (one per store the session's streams read). */
  readonly #feeds = new Map<string, Set<SessionFeed>>();
  readonly #limiter = new Limiter(POLL_READS);
  readonly #listeners: [string, (payload: Payload) => void][];
  #streams = 0;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #dropped = 0;
  #readFailures = 0;

  constructor(readonly runner: TurnRunner) {
    this.#listeners = [
      ...WAKE_EVENTS.map((name): [string, (p: Payload) => void] => [name, (p) => this.#each(p.sessionId, (feed) => feed.wake())]),
      ...LIVE_EVENTS.map((name): [string, (p: Payload) => void] => [name, (p) => {
        const feeds = this.#feeds.get(p.sessionId);
        if (feeds === undefined) return;
        const frame = liveFrame(name, p); // built once for every stream of the session
        for (const feed of feeds) feed.live(frame);
      }]),
    ];
  }

  /** The feed of `sessionId` from `store` for a new stream (made if none is open). */
  open(store: LedgerStore, sessionId: string, pollMs: number): SessionFeed {
    if (this.#streams++ === 0) this.#attach();
    let feeds = this.#feeds.get(sessionId);
    if (feeds === undefined) this.#feeds.set(sessionId, feeds = new Set());
    for (const feed of feeds) {
      if (feed.store !== store) continue;
      // The shortest period a stream asks for; 0 (no polling) only when none asks for one.
      feed.pollMs = Math.min(feed.pollMs, pollMs) || Math.max(feed.pollMs, pollMs);
      return feed;
    }
    const feed = new SessionFeed(store, sessionId, pollMs, this.#limiter);
    feeds.add(feed);
    return feed;
  }

  /** A stream of `feed` ended (`dropped`: because its client did not read). */
  close(feed: SessionFeed, dropped: boolean): void {
    if (dropped) this.#dropped++;
    if (feed.clients.size === 0) {
      feed.close();
      this.#readFailures += feed.readFailures;
      const feeds = this.#feeds.get(feed.sessionId);
      feeds?.delete(feed);
      if (feeds?.size === 0) this.#feeds.delete(feed.sessionId);
    }
    if (--this.#streams === 0) this.#detach();
  }

  stats(): StreamStats {
    let feeds = 0;
    let readFailures = this.#readFailures;
    let timers = this.#heartbeat === undefined ? 0 : 1;
    for (const set of this.#feeds.values()) {
      feeds += set.size;
      for (const feed of set) {
        readFailures += feed.readFailures;
        if (feed.polling) timers++;
      }
    }
    return { streams: this.#streams, feeds, dropped: this.#dropped, readFailures, timers };
  }

  #each(sessionId: string, act: (feed: SessionFeed) => void): void {
    for (const feed of this.#feeds.get(sessionId) ?? []) act(feed);
  }

  /** Invariant 1. */
  #attach(): void {
    for (const [name, listener] of this.#listeners) this.runner.on(name as never, listener as never);
    this.#heartbeat = setInterval(() => {
      for (const feeds of this.#feeds.values()) for (const feed of feeds) feed.live(PING_FRAME);
    }, HEARTBEAT_MS);
    this.#heartbeat.unref?.();
  }

  #detach(): void {
    for (const [name, listener] of this.#listeners) this.runner.off(name as never, listener as never);
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }
}

const hubs = new WeakMap<TurnRunner, RunnerHub>();

/** The hub of `runner` (made at its first stream; kept with the runner for its counters). */
export function hubOf(runner: TurnRunner): RunnerHub {
  let hub = hubs.get(runner);
  if (hub === undefined) hubs.set(runner, hub = new RunnerHub(runner));
  return hub;
}

/**
 * The streams `eventStream` has open on `runner` now, and what became of the others: a leak check
 * (all zero but `dropped` and `readFailures` once every stream has ended) and a health figure.
 */
export function streamStats(runner: TurnRunner): StreamStats {
  return hubs.get(runner)?.stats() ?? { streams: 0, feeds: 0, dropped: 0, readFailures: 0, timers: 0 };
}
