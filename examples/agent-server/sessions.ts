/**
 * Sessions as the server keeps them: each has its running turn (if any) and its event log
 * (event-log.ts); their stream clients are kept apart (streams.ts). Bounded three ways: sessions
 * in count (`MAX_SESSIONS`), each log in count and bytes, and all logs together in bytes
 * (`MAX_TOTAL_LOG_BYTES`); the least recently used session without a running turn makes room.
 * Only a running turn holds a session: open streams do not. With a relay (redis-events.ts) the
 * events go through Redis Streams instead of the in-memory logs, so any instance serves a stream.
 */
import type { ServerResponse } from 'node:http';
import { EventLog, type EventType, type SessionEvent } from './event-log.js';
import { HttpError } from './http.js';
import { RedisEvents } from './redis-events.js';
import { Streams } from './streams.js';

export { EVENT_TYPES, type EventType, type SessionEvent } from './event-log.js';

/** Sessions kept at once; the least recently used one without a running turn makes room for a new one. */
export const MAX_SESSIONS = 1000;
/** Bytes of every session's log together; past it the least recently used idle sessions are forgotten. */
export const MAX_TOTAL_LOG_BYTES = 64 * 1024 * 1024;

/** One session as this server keeps it. */
export class Session {
  readonly id: string;
  /** The turn this instance runs for the session; `undefined` between turns. */
  turnId: string | undefined;
  /** That turn's prompt, for its `turn_started` event. */
  prompt: string | undefined;
  readonly log = new EventLog();

  constructor(id: string) {
    this.id = id;
  }

  /** This instance starts a turn of the session. */
  beginTurn(turnId: string, prompt: string): void {
    this.turnId = turnId;
    this.prompt = prompt;
  }

  /** The turn ended; false (and nothing changes) when it is not the session's current turn. */
  endTurn(turnId: string): boolean {
    if (this.turnId !== turnId) return false;
    this.turnId = undefined;
    this.prompt = undefined;
    return true;
  }
}

/** The sessions of this server, created on first use, and their stream clients. */
export class Sessions {
  readonly #sessions = new Map<string, Session>();
  readonly streams = new Streams();
  /** The events through Redis (every instance's), instead of this process's logs. */
  readonly relay: RedisEvents | undefined;
  /** Bytes of every log together. */
  #bytes = 0;

  constructor(relay?: RedisEvents) {
    this.relay = relay;
  }

  /** Stream clients connected now. */
  get clients(): number { return this.streams.count + (this.relay?.count ?? 0); }

  /** Stream clients dropped so far because they did not read. */
  get dropped(): number { return this.streams.dropped + (this.relay?.dropped ?? 0); }

  get size(): number { return this.#sessions.size; }

  /** Bytes of every session's log together. */
  get logBytes(): number { return this.#bytes; }

  get(id: string): Session | undefined {
    const session = this.#sessions.get(id);
    if (session !== undefined) {
      // Map order is recency order: re-insert on use.
      this.#sessions.delete(id);
      this.#sessions.set(id, session);
    }
    return session;
  }

  /** The session, created when new; `undefined` when every slot holds a running turn. */
  getOrCreate(id: string): Session | undefined {
    const known = this.get(id);
    if (known !== undefined) return known;
    if (this.#sessions.size >= MAX_SESSIONS && !this.#evictIdle(id)) return undefined;
    const session = new Session(id);
    this.#sessions.set(id, session);
    return session;
  }

  /** Appends an event to the session's log and sends it to the session's clients. */
  publish(session: Session, type: EventType, data: SessionEvent['data']): void {
    if (this.relay !== undefined) return this.relay.publish(session.id, type, data);
    const { frame, grew } = session.log.append(type, data);
    this.#bytes += grew;
    this.streams.send(session.id, frame);
    while (this.#bytes > MAX_TOTAL_LOG_BYTES && this.#evictIdle(session.id));
  }

  /**
   * Follows `sessionId` on `res` (already sent its SSE headers): replays the events after
   * `lastEventId` (all when absent), then streams. Creates no session.
   */
  follow(sessionId: string, res: ServerResponse, lastEventId: string | undefined): void {
    if (this.relay !== undefined) {
      void this.relay.follow(sessionId, res, lastEventId);
      return;
    }
    this.streams.follow(sessionId, res, this.#sessions.get(sessionId)?.log.since(lastEventId === undefined ? undefined : Number(lastEventId)) ?? []);
  }

  /** `Last-Event-ID` checked for this server's kind of ids; `undefined` when absent. Throws a 400 for a bad one. */
  lastEventId(raw: string | string[] | undefined): string | undefined {
    if (this.relay !== undefined) return RedisEvents.lastEventId(raw);
    if (raw === undefined || raw === '') return undefined;
    const id = Number(raw);
    if (typeof raw !== 'string' || !Number.isSafeInteger(id) || id < 0) {
      throw new HttpError(400, `Last-Event-ID: expected an event id (an integer >= 0), got ${JSON.stringify(String(raw).slice(0, 40))}`);
    }
    return raw;
  }

  /** A comment line to every client (keeps idle streams open through proxies); the relay's clients read again. */
  ping(): void {
    this.streams.ping();
    this.relay?.ping();
  }

  /** Ends every stream (shutdown). */
  endAll(): void {
    this.streams.endAll();
    this.relay?.endAll();
  }

  /** Forgets the least recently used session without a running turn, other than `keep`; false when there is none. */
  #evictIdle(keep: string): boolean {
    for (const session of this.#sessions.values()) {
      if (session.turnId !== undefined || session.id === keep) continue;
      this.#sessions.delete(session.id);
      this.#bytes -= session.log.bytes;
      return true;
    }
    return false;
  }

  [Symbol.iterator](): IterableIterator<Session> {
    return this.#sessions.values();
  }
}
