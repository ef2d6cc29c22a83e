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

export class CallProgress {
  /** The first HEAD_BYTES of text. */
  #head = '';
  #headBytes = 0;
  /** Text went past the head: later text goes to the tail only, so the order holds. */
  #headFull = false;
  /** The latest text after the head, oldest chunk first, within TAIL_BYTES. */
  readonly #tail: Array<{ text: string; bytes: number }> = [];
  #tailBytes = 0;
  /** Bytes of text dropped between the head and the tail. */
  #omitted = 0;
  #hasText = false;
  /** The latest non-text progress; `undefined` when there was none (or text came after it). */
  #latest: unknown = undefined;

  /** Keep `data`: its text within the bound, else it as the latest value. O(size of the chunk). */
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
    const bytes = utf8Bytes(text);
    this.#tail.push({ text, bytes });
    this.#tailBytes += bytes;
    while (this.#tailBytes > TAIL_BYTES) {
      const first = this.#tail[0]!;
      const over = this.#tailBytes - TAIL_BYTES;
      if (first.bytes <= over) {
        this.#tail.shift();
        this.#tailBytes -= first.bytes;
        this.#omitted += first.bytes;
        continue;
      }
      const keep = first.bytes - over;
      // `keep` UTF-16 units hold at least `keep` bytes: no need to encode the whole chunk.
      const kept = tailBytes(tailChars(first.text.length > keep ? first.text.slice(-keep) : first.text), keep);
      this.#tail[0] = { text: ownCopy(kept.text), bytes: kept.bytes }; // as the head: no slice of a bigger string
      this.#tailBytes -= first.bytes - kept.bytes;
      this.#omitted += first.bytes - kept.bytes;
    }
  }

  /** What a stop records (bounded by `maxBytes` too); `undefined` when nothing could be kept. */
  partial(maxBytes: number): ProgressPartial | undefined {
    if (this.#hasText) {
      // Cut once, from the parts: a second cut of the joined text would count only its own bytes.
      const { text, omittedBytes } = cutAround(this.#head, this.#omitted, this.#tail.map((c) => c.text).join(''), maxBytes);
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
