/**
 * The sessions' event streams through Redis Streams, so the page's stream works from any instance
 * (no sticky sessions): each event is `XADD`ed to its session's stream (capped `MAXLEN ~`, expiring
 * when the session is idle), then a `PUBLISH` on the session's channel wakes the instances whose
 * clients follow it. Each client reads the stream itself from its own position (`XRANGE`), so it
 * gets every event once and in order whichever instance wrote it; the SSE `id` is the stream
 * entry's id, so a client reconnecting to another instance with `Last-Event-ID` resumes exactly
 * where it was. A client is read for only while its socket drains, but a client that does not
 * read is dropped as without Redis (streams.ts: once `MAX_CLIENT_BACKLOG_BYTES` wait unsent for it):
 * new events are written to it even while it has not drained, so one that never reads gets there.
 * The streams are bounded in total too: an index (a sorted set by last event time) holds the
 * sessions that have one, and past `maxStreams` the least recently written ones are deleted.
 */
import type { ServerResponse } from 'node:http';
import { HttpError } from './http.js';
import { MAX_EVENT_BYTES, MAX_LOG_BYTES, MAX_LOG_EVENTS, framed, type EventType, type SessionEvent } from './event-log.js';
import { MAX_CLIENT_BACKLOG_BYTES, sendOrDrop } from './streams.js';

/** Entries a session's stream keeps (approximately: `MAXLEN ~`, trimmed by whole nodes). */
export const STREAM_MAX_EVENTS = MAX_LOG_EVENTS;
/** A session's stream expires this long after its last event. */
export const STREAM_TTL_MS = 24 * 60 * 60 * 1000;
/** Sessions with a stream in Redis at most (all instances together); past it the least recently written ones are deleted. */
export const MAX_EVENT_STREAMS = 10_000;
/** Entries of the first `XREVRANGE` when placing a new client (20 of the largest events are 1.25 MiB), and of the largest. */
const PLACE_PAGE = 20;
const PLACE_PAGE_MAX = 1000;
/** Bytes waiting unsent on a client's socket past which its reading waits for `drain` (or a new event). */
const HIGH_WATER_BYTES = 256 * 1024;
/** Entries read per `XRANGE`: a page written below the high water never passes the drop bound, however big its events. */
const PAGE = Math.floor((MAX_CLIENT_BACKLOG_BYTES - HIGH_WATER_BYTES) / MAX_EVENT_BYTES);
/** A Redis Streams entry id (`<ms>-<seq>`; `<ms>` alone is read as `<ms>-0`), each part at most `ID_PART_MAX`. */
const STREAM_ID = /^(\d{1,20})(?:-(\d{1,20}))?$/;
/** The largest part of a stream id Redis takes (2^64 − 1); an id of two is the last one, with nothing after it. */
const ID_PART_MAX = 2n ** 64n - 1n;

/** The node-redis calls used here (a client or a cluster client has them all). */
export interface EventsRedis {
  xAdd(key: string, id: string, message: Record<string, string>, options?: unknown): Promise<string>;
  xRange(key: string, start: string, end: string, options?: { COUNT?: number }): Promise<{ id: string; message: Record<string, string> }[]>;
  xRevRange(key: string, end: string, start: string, options?: { COUNT?: number }): Promise<{ id: string; message: Record<string, string> }[]>;
  pExpire(key: string, ms: number): Promise<unknown>;
  zAdd(key: string, member: { score: number; value: string }): Promise<number>;
  zCard(key: string): Promise<number>;
  zPopMinCount(key: string, count: number): Promise<{ value: string; score: number }[]>;
  del(key: string): Promise<number>;
  publish(channel: string, message: string): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
  unsubscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
}

interface Client {
  res: ServerResponse;
  /** The id of the last entry written to it; `undefined`: not placed yet. */
  cursor: string | undefined;
  reading: boolean;
  again: boolean;
  /** While its reading waits for `drain`: ends the wait (a new event came). */
  nudge: (() => void) | undefined;
}

interface Feed {
  clients: Set<Client>;
  wake: () => void;
  /** Resolves once the channel is subscribed. */
  subscribed: Promise<unknown>;
}

/** Every session's stream through Redis; see the file comment. */
export class RedisEvents {
  readonly #redis: EventsRedis;
  readonly #subscriber: EventsRedis;
  readonly #prefix: string;
  readonly #maxStreams: number;
  readonly #feeds = new Map<string, Feed>();
  #count = 0;
  #failures = 0;
  #dropped = 0;

  /**
   * @param redis the server's client (commands); `subscriber` a connection of its own in
   * subscribe mode; `prefix` the fleet's key prefix (the streams live beside its keys);
   * `maxStreams` sessions with a stream at most (default `MAX_EVENT_STREAMS`).
   */
  constructor(redis: EventsRedis, subscriber: EventsRedis, prefix: string, options: { maxStreams?: number } = {}) {
    this.#redis = redis;
    this.#subscriber = subscriber;
    this.#prefix = prefix;
    this.#maxStreams = options.maxStreams ?? MAX_EVENT_STREAMS;
  }

  /** Clients connected now. */
  get count(): number { return this.#count; }

  /** Events Redis refused or could not take (the ledger still has them; the page misses them). */
  get failures(): number { return this.#failures; }

  /** Clients dropped so far because they did not read. */
  get dropped(): number { return this.#dropped; }

  /** The index of the sessions that have a stream, scored by their last event's time (ms). */
  get indexKey(): string {
    return `${this.#prefix}:events:index`;
  }

  /** The key of a session's stream (the session's hash tag, as the fleet's keys). */
  key(sessionId: string): string {
    return `${this.#prefix}:{${sessionId}}:events`;
  }

  #channel(sessionId: string): string {
    return `${this.#prefix}:{${sessionId}}:events:new`;
  }

  /**
   * Appends the event to the session's stream, then wakes its followers. One session's events
   * are `XADD`ed in call order on one connection, so the stream's order is the order of the calls.
   */
  publish(sessionId: string, type: EventType, data: SessionEvent['data']): void {
    const key = this.key(sessionId);
    void this.#redis.xAdd(key, '*', { type, data: framed(data) }, { TRIM: { strategy: 'MAXLEN', strategyModifier: '~', threshold: STREAM_MAX_EVENTS } })
      .then(() => Promise.all([this.#redis.pExpire(key, STREAM_TTL_MS), this.#redis.publish(this.#channel(sessionId), ''), this.#indexed(sessionId)]))
      .catch((error: unknown) => {
        if (this.#failures++ === 0) console.error(`agent-server: events: Redis refused an event (${(error as Error)?.message}); the history keeps it`);
      });
  }

  /**
   * Marks the session's stream as written now; a session new to the index may make it pass
   * `maxStreams`, and then the least recently written sessions' streams are deleted. Two instances
   * trimming at once pop different sessions (`ZPOPMIN` is atomic).
   */
  async #indexed(sessionId: string): Promise<void> {
    const index = this.indexKey;
    if (await this.#redis.zAdd(index, { score: Date.now(), value: sessionId }) === 0) return;
    await this.#redis.pExpire(index, STREAM_TTL_MS);
    const over = await this.#redis.zCard(index) - this.#maxStreams;
    if (over <= 0) return;
    const gone = await this.#redis.zPopMinCount(index, over);
    await Promise.all(gone.map(({ value }) => this.#redis.del(this.key(value))));
  }

  /**
   * `Last-Event-ID` as a stream id; `undefined` when absent. Throws a 400 for anything else,
   * including an id Redis's `XRANGE` would refuse (a part past 2^64 − 1, or the last id, after
   * which nothing can come): sent to Redis, it would end the stream as a relay failure.
   */
  static lastEventId(raw: string | string[] | undefined): string | undefined {
    if (raw === undefined || raw === '') return undefined;
    const parts = typeof raw === 'string' ? STREAM_ID.exec(raw) : null;
    const ms = parts === null ? undefined : BigInt(parts[1]!);
    const seq = parts?.[2] === undefined ? 0n : BigInt(parts[2]);
    if (ms === undefined || ms > ID_PART_MAX || seq > ID_PART_MAX || (ms === ID_PART_MAX && seq === ID_PART_MAX)) {
      throw new HttpError(400, `Last-Event-ID: expected an event id (a stream id such as 1700000000000-0, each part at most ${ID_PART_MAX}), got ${JSON.stringify(String(raw).slice(0, 60))}`);
    }
    return raw as string;
  }

  /**
   * Follows `sessionId` on `res` (its SSE headers sent): the events after `lastEventId`, or the
   * newest ones (up to the in-memory log's bounds) when absent, then every new one.
   */
  async follow(sessionId: string, res: ServerResponse, lastEventId: string | undefined): Promise<void> {
    const client: Client = { res, cursor: lastEventId, reading: false, again: false, nudge: undefined };
    const feed = this.#feed(sessionId);
    feed.clients.add(client);
    this.#count++;
    res.once('close', () => {
      this.#count--;
      feed.clients.delete(client);
      if (feed.clients.size === 0 && this.#feeds.get(sessionId) === feed) {
        this.#feeds.delete(sessionId);
        void feed.subscribed.then(() => this.#subscriber.unsubscribe(this.#channel(sessionId), feed.wake)).catch(() => {});
      }
    });
    // Subscribed before the first read: an event added after the read wakes the client.
    try {
      await feed.subscribed;
      if (res.destroyed) return;
      if (client.cursor === undefined) client.cursor = await this.#place(sessionId, res);
    } catch (error) {
      this.#fail(res, error);
      return;
    }
    void this.#pump(sessionId, client);
  }

  /**
   * A comment line to every client (keeps idle streams open through proxies), and every client
   * reads again: a lost wake-up (the subscriber reconnected) costs at most one heartbeat.
   */
  ping(): void {
    for (const feed of this.#feeds.values()) {
      for (const client of feed.clients) if (!client.res.destroyed && client.res.writableLength < HIGH_WATER_BYTES) client.res.write(': ping\n\n');
      feed.wake();
    }
  }

  /** Ends every client's stream (shutdown). */
  endAll(): void {
    for (const feed of this.#feeds.values()) for (const client of feed.clients) client.res.end();
  }

  #feed(sessionId: string): Feed {
    let feed = this.#feeds.get(sessionId);
    if (feed === undefined) {
      const clients = new Set<Client>();
      const wake = () => { for (const client of clients) void this.#pump(sessionId, client); };
      feed = { clients, wake, subscribed: this.#subscriber.subscribe(this.#channel(sessionId), wake) };
      feed.subscribed.catch(() => {});
      this.#feeds.set(sessionId, feed);
    }
    return feed;
  }

  /**
   * A new client without `Last-Event-ID`: writes the newest events within the log's bounds and
   * returns the id of the last one written (`0-0` for an empty stream).
   */
  async #place(sessionId: string, res: ServerResponse): Promise<string> {
    const frames: string[] = [];
    let bytes = 0;
    let newestId: string | undefined;
    // Newest first, a page at a time, until the bounds are met: a stream of big events is read
    // about as far as it is sent, never whole. The first page is small; each next one is sized by
    // the bytes still to send over the frames' average size so far.
    for (let end = '+', count = PLACE_PAGE; frames.length < STREAM_MAX_EVENTS;) {
      const page = await this.#redis.xRevRange(this.key(sessionId), end, '-', { COUNT: count });
      newestId ??= page[0]?.id;
      for (const entry of page) {
        const frame = frameOf(entry);
        bytes += Buffer.byteLength(frame);
        if (bytes > MAX_LOG_BYTES && frames.length > 0) break;
        frames.push(frame);
      }
      if (page.length < count || bytes > MAX_LOG_BYTES) break;
      end = `(${page.at(-1)!.id}`;
      const fit = Math.ceil((MAX_LOG_BYTES - bytes) / (bytes / frames.length));
      count = Math.min(STREAM_MAX_EVENTS - frames.length, Math.max(PLACE_PAGE, Math.min(fit, PLACE_PAGE_MAX)));
    }
    if (frames.length > 0) res.write(frames.reverse().join(''));
    return newestId ?? '0-0';
  }

  /**
   * Writes the client what the stream has after its cursor, a page at a time, as its socket
   * drains. `again` says a new event came since the last `XRANGE` was sent (it may have missed
   * it): then the pump reads on at once, drained or not, so a client that does not read passes the
   * drop bound instead of holding its place for ever.
   */
  async #pump(sessionId: string, client: Client): Promise<void> {
    if (client.cursor === undefined) return; // still being placed: it reads right after
    if (client.reading) {
      client.again = true;
      client.nudge?.();
      return;
    }
    client.reading = true;
    try {
      for (;;) {
        client.again = false;
        const entries = await this.#redis.xRange(this.key(sessionId), `(${client.cursor}`, '+', { COUNT: PAGE });
        if (client.res.destroyed) return;
        if (entries.length > 0) {
          if (!sendOrDrop(client.res, entries.map(frameOf).join(''))) {
            this.#dropped++;
            return;
          }
          client.cursor = entries.at(-1)!.id;
          if (client.res.writableLength > HIGH_WATER_BYTES && !client.again) await drainedOrNudged(client);
          if (client.res.destroyed) return;
        }
        if (entries.length < PAGE && !client.again) return;
      }
    } catch (error) {
      this.#fail(client.res, error);
    } finally {
      client.reading = false;
    }
  }

  /** Redis failed under a client: its stream ends, and the page reconnects with its `Last-Event-ID`. */
  #fail(res: ServerResponse, error: unknown): void {
    if (this.#failures++ === 0) console.error(`agent-server: events: Redis read failed (${(error as Error)?.message}); the client reconnects`);
    res.destroy();
  }
}

/** A stream entry as its SSE frame. */
function frameOf(entry: { id: string; message: Record<string, string> }): string {
  return `id: ${entry.id}\nevent: ${entry.message.type}\ndata: ${entry.message.data}\n\n`;
}

/** Resolves once the client's socket drains, closes, or a new event nudges it. */
function drainedOrNudged(client: Client): Promise<void> {
  const { res } = client;
  return new Promise((resolve) => {
    const done = () => { res.off('drain', done); res.off('close', done); client.nudge = undefined; resolve(); };
    res.once('drain', done);
    res.once('close', done);
    client.nudge = done;
  });
}
