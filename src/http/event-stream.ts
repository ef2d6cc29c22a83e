/**
 * `eventStream`: a session's events as a Server-Sent Events `Response`, from the store after the
 * client's `Last-Event-ID`, then live; any instance sharing the store can resume it (docs/http.md).
 */

import { checkId, checkMs, describe } from '../errors.js';
import { Ledger } from '../ledger/ledger.js';
import { ShardedLedger } from '../ledger/sharded.js';
import { isLedgerStore, type LedgerStore } from '../ledger/store.js';
import { TurnRunner } from '../turn/runner.js';
import { lastEventId } from './frames.js';
import { checkBytes, checkRequest, jsonResponse } from './responses.js';
import { hubOf } from './runner-hub.js';
import { StreamClient } from './stream-client.js';

/** The default period of the poll for other instances' entries, in ms. */
export const DEFAULT_POLL_MS = 100;
/** The default bound on a stream's bytes its client has not read: past it, the stream is dropped. */
export const DEFAULT_MAX_BUFFERED_BYTES = 2 * 1024 * 1024;

/** What `eventStream` takes besides the runner and the request. */
export interface EventStreamOptions {
  /** The session whose events the stream carries. */
  sessionId: string;
  /**
   * The history to read: the store every instance serving the session shares (a `PgLedger`).
   * @default runner.ledger
   */
  store?: LedgerStore;
  /**
   * How often, in ms, a live stream's session is read from the store for the entries other
   * instances commit (one read per session and period, however many streams follow it; this
   * runner's own entries are read as soon as it writes them). 0: never (only this runner writes).
   * @default 100, or 0 for a file `Ledger` / `ShardedLedger` (one process owns it)
   */
  pollMs?: number;
  /**
   * Bytes of live events a stream may hold that its client has not read; past it the stream is
   * dropped (its connection closed) instead of buffered without end. The client reconnects with
   * `Last-Event-ID` and reads what it missed from the store. Catching up never counts: it is read
   * only as fast as the client reads.
   * @default 2097152 (2 MiB)
   */
  maxBufferedBytes?: number;
}

/**
 * A `text/event-stream` `Response` of the session's history entries after the request's
 * `Last-Event-ID` (all of them without it), then each new one as it is committed — by this runner
 * or any instance writing the same store — then live-only `tool_progress` and `question` events
 * (no `id`). Each entry's `id` is its `seq`, its `event` its `type`, its `data` the entry as JSON.
 * The stream ends when the request's signal aborts (the client went away) or its body is
 * cancelled; then nothing of it is left. A `Last-Event-ID` that is not a seq is a 400 JSON answer.
 * Throws a TypeError or RangeError naming the argument for a bad one.
 *
 * @example
 * app.get('/sessions/:id/events', (c) => eventStream(runner, c.req.raw, { sessionId: c.req.param('id') }));
 */
export function eventStream(runner: TurnRunner, request: Request, options: EventStreamOptions): Response {
  if (!(runner instanceof TurnRunner)) throw new TypeError(`eventStream: runner: expected a TurnRunner, got ${describe(runner)}`);
  checkRequest('eventStream', request);
  if (options === null || typeof options !== 'object') throw new TypeError(`eventStream: options: expected { sessionId, ... }, got ${describe(options)}`);
  const { sessionId, store = runner.ledger, pollMs, maxBufferedBytes } = options;
  checkId('eventStream: options.sessionId', sessionId);
  if (store === undefined) throw new TypeError('eventStream: options.store: the runner has no ledger; pass the store its history is in');
  if (!isLedgerStore(store)) throw new TypeError(`eventStream: options.store: expected a LedgerStore, got ${describe(store)}`);
  checkMs('eventStream: options.pollMs', pollMs);
  const maxBytes = checkBytes('eventStream: options.maxBufferedBytes', maxBufferedBytes, DEFAULT_MAX_BUFFERED_BYTES);
  let from: number;
  try {
    from = lastEventId(request.headers.get('last-event-id'));
  } catch (error) {
    return jsonResponse(400, { error: (error as Error).message });
  }
  const hub = hubOf(runner);
  const feed = hub.open(store, sessionId, pollMs ?? (store instanceof Ledger || store instanceof ShardedLedger ? 0 : DEFAULT_POLL_MS));
  const client = new StreamClient(hub, feed, from, maxBytes, request.signal);
  return new Response(client.body(), {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no', // nginx: pass each event on as it comes
    },
  });
}
