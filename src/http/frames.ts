/**
 * The Server-Sent Events frames of a session's stream (docs/http.md, "Events"): a history entry is
 * `id: <seq>`, `event: <entry.type>`, `data: <the entry as JSON>`; a live-only event (`tool_progress`,
 * `question`) has no `id`, so a client's `Last-Event-ID` always names an entry of the store.
 * JSON never holds a raw line break, so every `data` is one line.
 */

import type { LedgerEntry } from '../ledger/entry.js';

const encoder = new TextEncoder();

/** A history entry's frame (built once, shared by every stream of the session). */
export function entryFrame(entry: LedgerEntry): Uint8Array {
  return encoder.encode(`id: ${entry.seq}\nevent: ${entry.type}\ndata: ${JSON.stringify(entry)}\n\n`);
}

/** A live-only event's frame: no `id` (it is in no store, so no client can resume from it). */
export function liveFrame(event: string, payload: object): Uint8Array {
  return encoder.encode(`event: ${event}\ndata: ${JSON.stringify(payload, errorsAsText)}\n\n`);
}

/** A comment line: keeps an idle stream open through proxies; `EventSource` ignores it. */
export const PING_FRAME = encoder.encode(': ping\n\n');

/** `JSON.stringify` replacer: an Error as its message (its own fields are not enumerable). */
export function errorsAsText(_key: string, value: unknown): unknown {
  return value instanceof Error ? value.message : value;
}

/**
 * The `Last-Event-ID` header as a `seq`: absent or empty is 0 (the session from its start); else a
 * non-negative safe integer, or a RangeError naming the header.
 */
export function lastEventId(header: string | null): number {
  if (header === null || header.trim() === '') return 0;
  const text = header.trim();
  const seq = /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(seq)) {
    throw new RangeError(`Last-Event-ID: expected an entry's seq (a non-negative integer), got ${JSON.stringify(text.slice(0, 40))}`);
  }
  return seq;
}
