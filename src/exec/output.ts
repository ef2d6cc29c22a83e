/**
 * One stream of a child's output: decoded as it arrives, handed to `onOutput`, and kept within
 * `maxBuffer` characters as its head and its tail.
 *
 * Invariants:
 * 1. Text is decoded by one `StringDecoder` per stream, so a UTF-8 character split across reads
 *    reaches `onOutput` (and the result) whole, with the read that completes it.
 * 2. The budget: `headCap = ceil(cap / 2)` first characters and `tailCap = floor(cap / 2)` last
 *    ones. While the text fits in `cap` it is kept whole; past it, the result is the head, a line
 *    `… N bytes omitted …` and the tail (N: the UTF-8 bytes of the decoded text that neither
 *    holds, so the bytes the child wrote for UTF-8 output; a byte that is not UTF-8 counts as its
 *    replacement character, 3, so a cut stream never reads as 0 omitted). Neither end is cut
 *    inside a surrogate pair.
 * 3. Memory is bounded and nothing is copied: the tail is a queue of the pieces as they arrived
 *    (small ones merged), whole pieces dropped from its front while the rest still holds
 *    `tailCap` characters, so it holds at most `tailCap` plus one piece. Head and tail are joined
 *    once, as rope strings (`+`), never flattened here: characters and bytes are counted per piece
 *    as it arrives (a flat string), and the tail's bytes piece by piece once the output is cut
 *    (reading a rope's characters would flatten, that is copy, all of it).
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
import { isHighSurrogate, omittedLine, tailChars, utf8Bytes } from '../base/head-tail.js';
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
 * keeps this much instead (one more append would throw `RangeError: Invalid string length` from a
 * stream callback, where nothing can catch it).
 */
export const MAX_OUTPUT_CHARS = constants.MAX_STRING_LENGTH - 64;

/** Pieces shorter than this are merged into the tail's last piece (per-string overhead, invariant 3). */
const MERGE_BELOW = 8192;

export class Output {
  /** Resolves (never rejects) when the stream has closed. */
  readonly closed: Promise<void>;
  readonly #stream: Readable;
  readonly #name: 'stdout' | 'stderr';
  readonly #decoder = new StringDecoder('utf8');
  readonly #onOutput: OnOutput | undefined;
  readonly #cap: number;
  readonly #headCap: number;
  readonly #tailCap: number;
  #head = '';
  #headLength = 0;
  #headBytes = 0;
  /** True once the head takes no more (its cap reached, or one short of a cut surrogate pair). */
  #headFull = false;
  /** The tail's pieces from `#first` on, and their characters in all. */
  #pieces: string[] = [];
  #first = 0;
  #tailLength = 0;
  /** True once a piece was dropped from the tail: more than `cap` characters arrived. */
  #cut = false;
  /** UTF-8 bytes of the text decoded so far (the bytes read, for UTF-8 output; invariant 2). */
  #bytes = 0;
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
    this.#cap = Math.min(maxBuffer, MAX_OUTPUT_CHARS);
    this.#headCap = Math.ceil(this.#cap / 2);
    this.#tailCap = this.#cap - this.#headCap;
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
    let tail = '';
    if (!this.#cut && this.#headLength + this.#tailLength <= this.#cap) {
      for (let i = this.#first; i < this.#pieces.length; i++) tail += this.#pieces[i];
      return { text: this.#head + tail, omittedBytes: 0 };
    }
    let tailBytes = 0;
    const excess = this.#tailLength - this.#tailCap;
    for (let i = this.#first; i < this.#pieces.length; i++) {
      let piece = this.#pieces[i]!;
      if (i === this.#first && excess > 0) {
        // Only this piece is cut, and it is small: reading its characters copies little.
        piece = tailChars(piece.slice(excess));
      }
      tail += piece;
      tailBytes += utf8Bytes(piece);
    }
    const omittedBytes = Math.max(0, this.#bytes - this.#headBytes - tailBytes);
    // The same shape as the runner's bounded outputs and toModelMessages' partials: `head\n… N …\ntail`.
    return { text: `${this.#head}\n${omittedLine(omittedBytes)}\n${tail}`, omittedBytes };
  }

  destroy(): void {
    this.#stream.destroy();
  }

  #take(part: string): void {
    if (part === '') return;
    // Counted on the decoded part (a flat string), not the read: where the bytes are not UTF-8, the
    // head and tail are counted on their replacement characters, and so must the whole be.
    this.#bytes += utf8Bytes(part);
    this.#keep(part);
    if (this.#onOutput !== undefined) this.#emit(part);
  }

  #keep(part: string): void {
    let rest = part;
    if (!this.#headFull) {
      const room = this.#headCap - this.#headLength;
      if (rest.length < room) return this.#addToHead(rest);
      // The head is full: cut the part, one character short if that would split a surrogate pair.
      const cut = room > 0 && isHighSurrogate(rest.charCodeAt(room - 1)) ? room - 1 : room;
      this.#addToHead(rest.slice(0, cut));
      this.#headFull = true;
      rest = rest.slice(cut);
      if (rest === '') return;
    }
    this.#addToTail(rest);
  }

  #addToHead(piece: string): void {
    if (piece === '') return;
    this.#head += piece;
    this.#headLength += piece.length;
    this.#headBytes += utf8Bytes(piece);
  }

  #addToTail(piece: string): void {
    const last = this.#pieces.length - 1;
    if (last >= this.#first && this.#pieces[last]!.length < MERGE_BELOW) this.#pieces[last] += piece;
    else this.#pieces.push(piece);
    this.#tailLength += piece.length;
    // Drop whole pieces from the front while the rest still holds `tailCap` characters.
    while (this.#first < this.#pieces.length && this.#tailLength - this.#pieces[this.#first]!.length >= this.#tailCap) {
      this.#tailLength -= this.#pieces[this.#first]!.length;
      this.#pieces[this.#first++] = ''; // let it go now, not at the next compaction
      this.#cut = true;
    }
    if (this.#first > 1024 && this.#first * 2 > this.#pieces.length) {
      this.#pieces = this.#pieces.slice(this.#first);
      this.#first = 0;
    }
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
