/**
 * The Server-Sent Events clients of every session, keyed by session id (not held by a session, so
 * a client watching a session that has no turn takes no session slot, and an evicted session's
 * clients still get the events of its next turn). A client that does not read is dropped once its
 * backlog passes `MAX_CLIENT_BACKLOG_BYTES`, instead of the server buffering for it without end;
 * a browser's `EventSource` reconnects by itself with `Last-Event-ID` and gets what it missed.
 */
import type { ServerResponse } from 'node:http';
import { MAX_LOG_BYTES } from './event-log.js';

/** Bytes a client may have waiting unsent (its socket's buffer) before it is dropped: a full replay and then some. */
export const MAX_CLIENT_BACKLOG_BYTES = 2 * MAX_LOG_BYTES;

/** Every session's stream clients; see the file comment. */
export class Streams {
  readonly #clients = new Map<string, Set<ServerResponse>>();
  #count = 0;
  #dropped = 0;

  /** Clients connected now. */
  get count(): number { return this.#count; }

  /** Clients dropped so far because they did not read. */
  get dropped(): number { return this.#dropped; }

  /** Adds `res` (already sent its headers) as a client of `sessionId`, after writing it `replay`. */
  follow(sessionId: string, res: ServerResponse, replay: readonly string[]): void {
    let clients = this.#clients.get(sessionId);
    if (clients === undefined) this.#clients.set(sessionId, clients = new Set());
    clients.add(res);
    this.#count++;
    res.once('close', () => {
      this.#count--;
      clients.delete(res);
      if (clients.size === 0 && this.#clients.get(sessionId) === clients) this.#clients.delete(sessionId);
    });
    if (replay.length > 0) this.#write(res, replay.join(''));
  }

  /** Writes `frame` to every client of `sessionId`. */
  send(sessionId: string, frame: string): void {
    for (const res of this.#clients.get(sessionId) ?? []) this.#write(res, frame);
  }

  /** A comment line to every client: keeps an idle stream open through proxies. */
  ping(): void {
    for (const clients of this.#clients.values()) for (const res of clients) this.#write(res, ': ping\n\n');
  }

  /** Ends every client's stream (shutdown). */
  endAll(): void {
    for (const clients of this.#clients.values()) for (const res of clients) res.end();
  }

  #write(res: ServerResponse, chunk: string): void {
    if (!res.destroyed && !sendOrDrop(res, chunk)) this.#dropped++;
  }
}

/**
 * Writes `chunk` to a stream client, or drops the client (false) once its backlog is over
 * `MAX_CLIENT_BACKLOG_BYTES` (a write's return alone is false past 16 KiB): the one rule for a
 * client that does not read, with or without Redis.
 */
export function sendOrDrop(res: ServerResponse, chunk: string): boolean {
  res.write(chunk);
  if (res.writableLength <= MAX_CLIENT_BACKLOG_BYTES) return true;
  res.destroy();
  return false;
}
