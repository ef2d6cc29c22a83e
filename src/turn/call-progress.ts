/**
 * A tool call's output so far (`call.progress(data)`, docs/design.md "Live output"): kept within
 * `MAX_PROGRESS_BYTES` while the call runs, so a call a stop cuts can record on its `tool_aborted`
 * entry how far it got. Text progress (a string, or `{ stream, text }` as `exec`'s `onOutput`
 * gives) keeps its first quarter and its latest three quarters with the count of bytes between;
 * other progress keeps its latest value. Nothing here is written line by line: only a stop reads it.
 */

import { MAX_PROGRESS_BYTES } from '../constants.js';
import { cutAround, headBytes, headChars, ownCopy, tailBytes, tailChars, utf8Bytes } from '../base/head-tail.js';
import { recordableCut } from './bounded-output.js';

const HEAD_BYTES = Math.floor(MAX_PROGRESS_BYTES / 4);
const TAIL_BYTES = MAX_PROGRESS_BYTES - HEAD_BYTES;

/** What a stop records of a call's progress: `partial` with `progress: true`. */
export interface ProgressPartial {
  /** The call's text so far (head, `… N bytes omitted …`, tail), or its latest non-text progress as JSON. */
  output: unknown;
  /** Always false: the call returned nothing of its own. */
  success: false;
  /** Marks `output` as the call's progress so far, not something it returned or threw. */
  progress: true;
  /**
   * The bytes of the call's text that `output` leaves out, at its `… N bytes omitted …` line (N is
   * this count); absent when it holds all of it. A later cut (`toModelMessages`) reads it to keep
   * counting the whole output's bytes.
   */
  omittedBytes?: number;
}

/** The text of a progress datum: a string, or a `text` string field; `undefined` for other data. */
function textOf(data: unknown): string | undefined {
  if (typeof data === 'string') return data;
  if (data === null || typeof data !== 'object') return undefined;
  try {
    const { text } = data as { text?: unknown };
    return typeof text === 'string' ? text : undefined;
  } catch {
    return undefined; // a getter or a Proxy trap that throws: kept as data, not as text
  }
}

/**
 * Pieces shorter than this are gathered into one chunk of the tail before it is kept, so a tool
 * that relays its output a character at a time keeps about TAIL_BYTES / CHUNK_BYTES chunks, not
 * one per piece.
 */
const CHUNK_BYTES = 1024;

/**
 * Invariants of the text kept (each `add` costs O(size of its piece), amortised, whatever was kept
 * before it; only `partial`, which a stop calls once, costs O(bound)):
 * 1. `#head` is the text's first bytes, at most HEAD_BYTES; later text goes to the tail only.
 * 2. The tail is `#chunks` (oldest first) then `#open` (the latest small pieces, not yet one
 *    chunk); `#tailBytes` counts both. A chunk is dropped whole, and only while the chunks after it
 *    still hold TAIL_BYTES, so the tail holds at least the latest TAIL_BYTES of the text after the
 *    head and at most TAIL_BYTES + one chunk (a piece bigger than TAIL_BYTES is cut to its last
 *    TAIL_BYTES first). `partial` cuts it to exactly TAIL_BYTES.
 * 3. `#omitted` counts the bytes of the dropped chunks: head + omitted + tail is the whole text.
 * 4. Every chunk holds at least CHUNK_BYTES (smaller pieces are gathered in `#open` first) and the
 *    tail at most 2 × TAIL_BYTES, so `#chunks` has at most 2 × TAIL_BYTES / CHUNK_BYTES (96)
 *    entries: dropping its first one is cheap whatever the pieces' size. (One entry a piece, as
 *    before, made a relay of one character at a time shift ~48 K entries a call.)
 */
export class CallProgress {
  /** The first HEAD_BYTES of text (invariant 1). */
  #head = '';
  #headBytes = 0;
  /** Text went past the head: later text goes to the tail only, so the order holds. */
  #headFull = false;
  /** The tail's chunks, oldest first (invariants 2 and 4). */
  readonly #chunks: Array<{ text: string; bytes: number }> = [];
  /** The latest pieces shorter than CHUNK_BYTES, gathered into the next chunk. */
  #open: string[] = [];
  #openBytes = 0;
  /** Bytes of `#chunks` and `#open`. */
  #tailBytes = 0;
  /** Bytes of text dropped between the head and the tail (invariant 3). */
  #omitted = 0;
  #hasText = false;
  /** The latest non-text progress; `undefined` when there was none (or text came after it). */
  #latest: unknown = undefined;

  /** Keep `data`: its text within the bound, else it as the latest value. O(size of the chunk), amortised. */
  add(data: unknown): void {
    const text = textOf(data);
    if (text === undefined) {
      this.#latest = data;
      return;
    }
    this.#hasText = true;
    this.#latest = undefined;
    let rest = text;
    if (!this.#headFull) {
      const room = HEAD_BYTES - this.#headBytes;
      const head = headBytes(headChars(rest.length > room ? rest.slice(0, room) : rest), room);
      // A part of a longer string is copied: a slice would keep all of the caller's string alive.
      this.#head += head.text.length < rest.length ? ownCopy(head.text) : head.text;
      this.#headBytes += head.bytes;
      rest = rest.slice(head.text.length);
      this.#headFull = rest.length > 0;
    }
    if (rest.length > 0) this.#addToTail(rest);
  }

  #addToTail(text: string): void {
    let bytes = utf8Bytes(text);
    if (bytes > TAIL_BYTES) {
      // It alone fills the tail: everything kept before it is dropped, and it is cut now (as the
      // head: an own copy, not a slice of a bigger string). `TAIL_BYTES` units hold at least as many bytes.
      const kept = tailBytes(tailChars(text.slice(-TAIL_BYTES)), TAIL_BYTES);
      this.#omitted += this.#tailBytes + bytes - kept.bytes;
      this.#chunks.length = 0;
      this.#open = [];
      this.#openBytes = 0;
      this.#chunks.push({ text: ownCopy(kept.text), bytes: kept.bytes });
      this.#tailBytes = kept.bytes;
      return;
    }
    this.#tailBytes += bytes;
    if (bytes < CHUNK_BYTES || this.#openBytes > 0) {
      this.#open.push(text);
      this.#openBytes += bytes;
      if (this.#openBytes < CHUNK_BYTES) {
        this.#dropOld();
        return;
      }
      // One flat string: the pieces it joins are let go.
      text = this.#open.join('');
      bytes = this.#openBytes;
      this.#open = [];
      this.#openBytes = 0;
    }
    this.#chunks.push({ text, bytes });
    this.#dropOld();
  }

  /** Drop whole chunks from the front while the rest still holds TAIL_BYTES (invariant 2). */
  #dropOld(): void {
    while (this.#chunks.length > 0 && this.#tailBytes - this.#chunks[0]!.bytes >= TAIL_BYTES) {
      const first = this.#chunks.shift()!; // invariant 4: a short array
      this.#tailBytes -= first.bytes;
      this.#omitted += first.bytes;
    }
  }

  /** The tail's text, exactly its latest TAIL_BYTES (on a character boundary), and the bytes it drops. */
  #tail(): { text: string; dropped: number } {
    const text = this.#chunks.map((c) => c.text).join('') + this.#open.join('');
    if (this.#tailBytes <= TAIL_BYTES) return { text, dropped: 0 };
    const kept = tailBytes(tailChars(text.slice(-TAIL_BYTES)), TAIL_BYTES);
    return { text: kept.text, dropped: this.#tailBytes - kept.bytes };
  }

  /** What a stop records (bounded by `maxBytes` too); `undefined` when nothing could be kept. */
  partial(maxBytes: number): ProgressPartial | undefined {
    if (this.#hasText) {
      // Cut once, from the parts: a second cut of the joined text would count only its own bytes.
      const tail = this.#tail();
      const { text, omittedBytes } = cutAround(this.#head, this.#omitted + tail.dropped, tail.text, maxBytes);
      return omittedBytes === 0 ? { output: text, success: false, progress: true } : { output: text, success: false, progress: true, omittedBytes };
    }
    if (this.#latest === undefined) return undefined;
    try {
      const { value, omittedBytes } = recordableCut('progress', this.#latest, Math.min(maxBytes, MAX_PROGRESS_BYTES));
      return omittedBytes === 0 ? { output: value, success: false, progress: true } : { output: value, success: false, progress: true, omittedBytes };
    } catch {
      return undefined; // progress JSON cannot encode is shown live, never recorded
    }
  }
}
