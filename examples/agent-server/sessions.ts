/**
 * Sessions as the server keeps them: each has an event log that Server-Sent Events clients follow,
 * numbered 1, 2, 3 … so a client reconnecting with `Last-Event-ID` gets exactly what it missed.
 * The log is memory only and bounded; the ledger is the durable record (`/history`).
 */
import type { ServerResponse } from 'node:http';

/** The events a session's stream carries. */
export const EVENT_TYPES = [
  'turn_started', 'say', 'tool_call', 'tool_output', 'question', 'turn_completed', 'turn_failed', 'turn_aborted',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** One event of a session's stream; `data` always has `turnId`. */
export interface SessionEvent {
  id: number;
  type: EventType;
  data: { turnId: string } & Record<string, unknown>;
}

/** Events a session keeps for replay; a client further behind gets the newest this many. */
const MAX_EVENTS = 5000;
/** Sessions kept at once; the least recently used idle one makes room for a new one. */
const MAX_SESSIONS = 1000;

/** One session as this server keeps it: its running turn (if any), its event log and its SSE clients. */
export class Session {
  readonly id: string;
  /** The turn this instance runs for the session; `undefined` between turns. */
  turnId: string | undefined;
  /** That turn's prompt, for its `turn_started` event. */
  prompt: string | undefined;
  readonly #events: SessionEvent[] = [];
  readonly #clients = new Set<ServerResponse>();
  #lastId = 0;

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

  get clients(): number { return this.#clients.size; }

  /** Appends to the log and writes to every connected client. */
  publish(type: EventType, data: SessionEvent['data']): SessionEvent {
    const event = { id: ++this.#lastId, type, data };
    this.#events.push(event);
    if (this.#events.length > MAX_EVENTS) this.#events.splice(0, this.#events.length - MAX_EVENTS);
    for (const client of this.#clients) client.write(frame(event));
    return event;
  }

  /**
   * Follows the log on `res` (already sent its SSE headers): replays every event after
   * `lastEventId`, then streams. An id past the end (this server restarted since) replays all.
   */
  follow(res: ServerResponse, lastEventId: number | undefined): void {
    const from = lastEventId === undefined || lastEventId > this.#lastId ? 0 : lastEventId;
    for (const event of this.#events) if (event.id > from) res.write(frame(event));
    this.#clients.add(res);
    res.once('close', () => this.#clients.delete(res));
  }

  /** A comment line to every client: keeps an idle stream open through proxies. */
  ping(): void {
    for (const client of this.#clients) client.write(': ping\n\n');
  }

  /** Ends every client's stream (shutdown). */
  endClients(): void {
    for (const client of this.#clients) client.end();
    this.#clients.clear();
  }

  get idle(): boolean { return this.turnId === undefined && this.#clients.size === 0; }
}

/** The sessions of this server, created on first use. */
export class Sessions {
  readonly #sessions = new Map<string, Session>();

  get size(): number { return this.#sessions.size; }

  get(id: string): Session | undefined {
    const session = this.#sessions.get(id);
    if (session !== undefined) {
      // Map order is recency order: re-insert on use.
      this.#sessions.delete(id);
      this.#sessions.set(id, session);
    }
    return session;
  }

  /** The session, created when new; `undefined` when full of sessions that are all in use. */
  getOrCreate(id: string): Session | undefined {
    const known = this.get(id);
    if (known !== undefined) return known;
    if (this.#sessions.size >= MAX_SESSIONS) {
      const idle = [...this.#sessions.values()].find((s) => s.idle);
      if (idle === undefined) return undefined;
      this.#sessions.delete(idle.id);
    }
    const session = new Session(id);
    this.#sessions.set(id, session);
    return session;
  }

  [Symbol.iterator](): IterableIterator<Session> {
    return this.#sessions.values();
  }
}

function frame(event: SessionEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`;
}
