/**
 * One stream of a child's output: decoded as it arrives, handed to `onOutput`, and kept within
 * `maxBuffer` bytes (UTF-8) as its head and its tail.
 *
 * Invariants:
 * 1. Text is decoded by one `StringDecoder` per stream, so a UTF-8 character split across reads
 *    reaches `onOutput` (and the result) whole, with the read that completes it.
 * 2. The budget, in UTF-8 bytes of the decoded text (the unit of every output bound), split as
 *    every head and tail is (`splitBudget`): the first `ceil(cap / 2)` bytes and the last
 *    `floor(cap / 2)`. While the text fits in `cap` it is kept whole; past it, the result is the head, a line `… N bytes omitted …` and
 *    the tail (N: the bytes that neither holds, so the bytes the child wrote for UTF-8 output; a
 *    byte that is not UTF-8 counts as its replacement character, 3, so a cut stream never reads as
 *    0 omitted). Neither end is cut inside a character: an end keeps less rather than half of one.
 * 3. Memory is bounded: head and tail are kept by a `HeadTailKeeper` (src/base/head-tail-keeper.ts,
 *    the one streaming head-and-tail, as a call's progress is kept), which holds the head, the
 *    tail and one read beyond; bytes are counted per read as it arrives (a flat string), and the
 *    result is joined once, as rope strings, never flattened here.
 * 4. `onOutput` is never called once the result is made: by then the stream has closed (child.ts
 *    awaits it, or destroys it after a bounded read, drain.ts), and nothing comes after 'close'. A
 *    throw (or a rejected promise) from it is reported once per stream as a warning, never thrown
 *    here: it runs inside a stream callback, where a throw would kill the host and leak the child.
 * 5. Nothing of a chunk outlives its `onOutput` call here: what a promise `onOutput` returns keeps
 *    (its rejection handler, `#onError`) is made once per stream. Memory is the head, the tail and
 *    one read, whether or not that promise ever settles.
 */

import { constants } from 'node:buffer';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { joinCut, splitBudget, utf8Bytes } from '../base/head-tail.js';
import { HeadTailKeeper } from '../base/head-tail-keeper.js';
import { renderSafely } from '../base/render.js';
import { callGuarded, warnCallbackFailed } from '../base/user-callback.js';

/** What `onOutput` receives: the stream and the text that arrived on it, never a split character. */
export interface OutputChunk {
  /** Which of the child's streams the text came from. */
  stream: 'stdout' | 'stderr';
  /** Decoded as UTF-8; never empty. */
  text: string;
}

/** The `options.onOutput` callback of `exec` and `spawnBackground`. */
export type OnOutput = (chunk: OutputChunk) => void;

/**
 * The longest string V8 can make, less room for the omitted-bytes line: a `maxBuffer` above it
 * (bytes, so at least as many characters)
 * keeps this much instead (one more append would throw `RangeError: Invalid string length` from a
 * stream callback, where nothing can catch it).
 */
export const MAX_OUTPUT_CHARS = constants.MAX_STRING_LENGTH - 64;

export class Output {
  /** Resolves (never rejects) when the stream has closed. */
  readonly closed: Promise<void>;
  readonly #stream: Readable;
  readonly #name: 'stdout' | 'stderr';
  readonly #decoder = new StringDecoder('utf8');
  readonly #onOutput: OnOutput | undefined;
  /** The head and the tail kept (invariants 2 and 3). */
  readonly #keeper: HeadTailKeeper;
  /** True once a throw of `onOutput` was reported (one warning a stream). */
  #warned = false;
  /**
   * The handler of `onOutput`'s throws and rejections, made once: a closure made per call would
   * share its scope with the chunk, and a promise `onOutput` returns that stays pending would keep
   * every chunk through it (invariant 5).
   */
  readonly #onError = (error: unknown): void => this.#warn(error);

  constructor(stream: Readable, name: 'stdout' | 'stderr', maxBuffer: number, onOutput: OnOutput | undefined) {
    this.#stream = stream;
    this.#name = name;
    this.#onOutput = onOutput;
    const { head, tail } = splitBudget(Math.min(maxBuffer, MAX_OUTPUT_CHARS));
    this.#keeper = new HeadTailKeeper(head, tail);
    stream.on('data', (chunk: Buffer) => this.#take(this.#decoder.write(chunk)));
    this.closed = new Promise((resolve) => {
      stream.once('close', () => {
        this.#take(this.#decoder.end());
        resolve();
      });
      // An 'error' is always followed by 'close'; the listener only keeps it from being thrown.
      stream.on('error', () => {});
    });
  }

  /**
   * The output kept (invariant 2): all of it, or its head, the omitted-bytes line and its tail; and
   * the bytes the child wrote that it does not hold (0 when it fits in `maxBuffer`).
   */
  kept(): { text: string; omittedBytes: number } {
    const { head, tail, omittedBytes } = this.#keeper.kept();
    return { text: omittedBytes === 0 ? head + tail : joinCut(head, omittedBytes, tail), omittedBytes };
  }

  destroy(): void {
    this.#stream.destroy();
  }

  #take(part: string): void {
    if (part === '') return;
    // Counted on the decoded part (a flat string), not the read: where the bytes are not UTF-8, the
    // head and tail are counted on their replacement characters, and so must the whole be.
    this.#keeper.add(part, utf8Bytes(part));
    if (this.#onOutput !== undefined) this.#emit(part);
  }

  #emit(text: string): void {
    callGuarded(() => this.#onOutput!({ stream: this.#name, text }), this.#onError);
  }

  #warn(error: unknown): void {
    if (this.#warned) return;
    this.#warned = true;
    warnCallbackFailed(`exec: options.onOutput threw on ${this.#name}: ${renderSafely(error)}; the command went on, and later throws of this call are not reported`,
      'FULLSTOP_ON_OUTPUT_THREW');
  }
}
