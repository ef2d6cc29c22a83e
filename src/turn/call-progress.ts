/**
 * A tool call's output so far (`call.progress(data)`, docs/design.md "Live output"): kept within
 * `MAX_PROGRESS_BYTES` while the call runs, so a call a stop cuts can record on its `tool_aborted`
 * entry how far it got. Text progress (a string, or `{ stream, text }` as `exec`'s `onOutput`
 * gives) keeps its first quarter and its latest three quarters with the count of bytes between;
 * other progress keeps its latest value. Nothing here is written line by line: only a stop reads it.
 */

import { MAX_PROGRESS_BYTES } from '../constants.js';
import { cutAround } from '../base/head-tail.js';
import { HeadTailKeeper } from '../base/head-tail-keeper.js';
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
export function textOf(data: unknown): string | undefined {
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
 * A call's progress: its text's first HEAD_BYTES and latest TAIL_BYTES, kept by a
 * `HeadTailKeeper` (src/base/head-tail-keeper.ts, the one streaming head-and-tail, as exec keeps a
 * stream), each `add` O(size of its piece) amortised whatever was kept before it; or, for other
 * progress, its latest value. Only `partial`, which a stop calls once, costs O(bound).
 */
export class CallProgress {
  readonly #text = new HeadTailKeeper(HEAD_BYTES, TAIL_BYTES);
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
    this.#text.add(text);
  }

  /** What a stop records (bounded by `maxBytes` too); `undefined` when nothing could be kept. */
  partial(maxBytes: number): ProgressPartial | undefined {
    if (this.#hasText) {
      // Cut once, from the parts: a second cut of the joined text would count only its own bytes.
      const kept = this.#text.kept();
      const { text, omittedBytes } = cutAround(kept.head, kept.omittedBytes, kept.tail, maxBytes);
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
