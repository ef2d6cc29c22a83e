/**
 * One open event stream: the source of its `Response` body. It first catches up from the store
 * (pulled: a page is read only when the client has room for it, so a slow reader is read for as
 * fast as it reads), then joins its session's feed (session-feed.ts invariant 2) and is pushed
 * each new entry. Pushed bytes the client has not read are bounded (`maxBufferedBytes`): past it
 * the stream is dropped (errored) rather than buffered without end; the client reconnects with
 * `Last-Event-ID` and gets what it missed from the store.
 */

import type { LedgerEntry } from '../ledger/entry.js';
import type { RunnerHub } from './runner-hub.js';
import { StreamDroppedError } from './errors.js';
import { entryFrame } from './frames.js';
import { PAGE_ENTRIES, type FeedClient, type SessionFeed } from './session-feed.js';

/** Bytes the body's own queue asks for before the runtime reads it (the pull-side batch). */
const HIGH_WATER_BYTES = 64 * 1024;

/** See the file comment. */
export class StreamClient implements FeedClient {
  cursor: number;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  #live = false;
  #closed = false;
  /** The mean frame size of the last page read, to read about as many entries as fit the room. */
  #frameBytes = 256;
  readonly #signal: AbortSignal;
  readonly #onAbort = () => this.close();

  constructor(
    readonly hub: RunnerHub,
    readonly feed: SessionFeed,
    from: number,
    readonly maxBufferedBytes: number,
    signal: AbortSignal,
  ) {
    this.cursor = from;
    this.#signal = signal;
    feed.clients.add(this);
    if (signal.aborted) queueMicrotask(this.#onAbort);
    else signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** The body of the stream's `Response`. */
  body(): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>({
      start: (controller) => { this.#controller = controller; },
      pull: () => this.#catchUp(),
      cancel: () => this.close(),
    }, { highWaterMark: HIGH_WATER_BYTES, size: (chunk) => chunk.byteLength });
  }

  entry(entry: LedgerEntry, frame: Uint8Array): void {
    if (entry.seq <= this.cursor) return; // had it (session-feed.ts invariant 2)
    this.cursor = entry.seq;
    this.#push(frame);
  }

  live(frame: Uint8Array): void {
    if (this.#live) this.#push(frame);
  }

  /** Ends the stream and lets go of everything it holds (idempotent); `error` errors the body. */
  close(error?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#signal.removeEventListener('abort', this.#onAbort);
    this.feed.remove(this);
    this.hub.close(this.feed, error instanceof StreamDroppedError);
    try {
      if (error === undefined) this.#controller?.close();
      else this.#controller?.error(error);
    } catch {
      // Already cancelled by its consumer: nothing to end.
    }
  }

  /**
   * Reads the store after `cursor` a page per pull; once it has all, joins the feed. A page is
   * about what fits the client's room (entries counted by their recent size), and what is past the
   * room is left for the next pull: a stalled client holds about `HIGH_WATER_BYTES`, however big
   * the session's entries (500 entries of 24 KB a page held 12 MB a client).
   */
  async #catchUp(): Promise<void> {
    while (!this.#live && !this.#closed) {
      const limit = Math.max(1, Math.min(PAGE_ENTRIES, Math.floor(HIGH_WATER_BYTES / this.#frameBytes)));
      let page: LedgerEntry[];
      try {
        page = await this.feed.store.entries({ sessionId: this.feed.sessionId, afterSeq: this.cursor, limit });
      } catch (cause) {
        this.close(new Error(`eventStream: the store could not be read (${cause instanceof Error ? cause.message : String(cause)})`, { cause }));
        return;
      }
      if (this.#closed) return;
      let bytes = 0;
      let sent = 0;
      for (const entry of page) {
        if (entry.seq <= this.cursor) continue;
        const frame = entryFrame(entry);
        bytes += frame.byteLength;
        sent++;
        this.cursor = entry.seq;
        this.#controller!.enqueue(frame); // pulled: within the client's room, never dropped
        if ((this.#controller!.desiredSize ?? 0) <= 0) break; // the room is full: the rest at the next pull
      }
      if (sent > 0) this.#frameBytes = Math.max(1, bytes / sent);
      if (page.length === limit || this.cursor < (page.at(-1)?.seq ?? 0)) return; // more: the next pull
      this.#live = this.feed.goLive(this); // else the feed is ahead: read again
    }
  }

  #push(frame: Uint8Array): void {
    const controller = this.#controller;
    if (this.#closed || controller === undefined) return;
    controller.enqueue(frame);
    const queued = HIGH_WATER_BYTES - (controller.desiredSize ?? 0);
    if (queued > this.maxBufferedBytes) this.close(new StreamDroppedError(`eventStream: dropped: ${queued} bytes unread by the client (maxBufferedBytes ${this.maxBufferedBytes})`));
  }
}
