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
 * 3. Memory is bounded and nothing is copied: the tail is a queue of the pieces as they arrived
 *    (small ones merged), whole pieces dropped from its front while the rest still holds
 *    `tailCap` bytes, so it holds at most `tailCap` plus one piece. Head and tail are joined
 *    once, as rope strings (`+`), never flattened here: bytes are counted per piece as it arrives
 *    (a flat string), and only the tail's first piece is re-read when the output is cut.
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
import { headBytes, joinCut, splitBudget, tailBytes as lastBytes, utf8Bytes } from '../base/head-tail.js';
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
  #headBytes = 0;
  /** True once the head takes no more (its cap reached, or one short of a cut character). */
  #headFull = false;
  /** The tail's pieces from `#first` on, the UTF-8 bytes of each, and their bytes in all. */
  #pieces: string[] = [];
  #pieceBytes: number[] = [];
  #first = 0;
  #tailBytes = 0;
  /** True once a piece was dropped from the tail: more than `cap` bytes arrived. */
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
    ({ head: this.#headCap, tail: this.#tailCap } = splitBudget(this.#cap));
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
    if (!this.#cut && this.#headBytes + this.#tailBytes <= this.#cap) {
      for (let i = this.#first; i < this.#pieces.length; i++) tail += this.#pieces[i];
      return { text: this.#head + tail, omittedBytes: 0 };
    }
    let keptBytes = 0;
    const excess = this.#tailBytes - this.#tailCap;
    for (let i = this.#first; i < this.#pieces.length; i++) {
      let piece = this.#pieces[i]!;
      let bytes = this.#pieceBytes[i]!;
      if (i === this.#first && excess > 0) {
        // Only this piece is cut, and it is one read at most: re-reading it copies little.
        ({ text: piece, bytes } = lastBytes(piece, bytes - excess));
      }
      tail += piece;
      keptBytes += bytes;
    }
    const omittedBytes = Math.max(0, this.#bytes - this.#headBytes - keptBytes);
    return { text: joinCut(this.#head, omittedBytes, tail), omittedBytes };
  }

  destroy(): void {
    this.#stream.destroy();
  }

  #take(part: string): void {
    if (part === '') return;
    // Counted on the decoded part (a flat string), not the read: where the bytes are not UTF-8, the
    // head and tail are counted on their replacement characters, and so must the whole be.
    const bytes = utf8Bytes(part);
    this.#bytes += bytes;
    this.#keep(part, bytes);
    if (this.#onOutput !== undefined) this.#emit(part);
  }

  #keep(part: string, bytes: number): void {
    let rest = part;
    let restBytes = bytes;
    if (!this.#headFull) {
      const room = this.#headCap - this.#headBytes;
      if (bytes < room) return this.#addToHead(part, bytes);
      // The head is full: its part ends on a character boundary at or before `room` bytes.
      const head = headBytes(part, room);
      this.#addToHead(head.text, head.bytes);
      this.#headFull = true;
      rest = part.slice(head.text.length);
      restBytes = bytes - head.bytes;
      if (rest === '') return;
    }
    this.#addToTail(rest, restBytes);
  }

  #addToHead(piece: string, bytes: number): void {
    if (piece === '') return;
    this.#head += piece;
    this.#headBytes += bytes;
  }

  #addToTail(piece: string, bytes: number): void {
    const last = this.#pieces.length - 1;
    if (last >= this.#first && this.#pieces[last]!.length < MERGE_BELOW) {
      this.#pieces[last] += piece;
      this.#pieceBytes[last] += bytes;
    } else {
      this.#pieces.push(piece);
      this.#pieceBytes.push(bytes);
    }
    this.#tailBytes += bytes;
    // Drop whole pieces from the front while the rest still holds `tailCap` bytes.
    while (this.#first < this.#pieces.length && this.#tailBytes - this.#pieceBytes[this.#first]! >= this.#tailCap) {
      this.#tailBytes -= this.#pieceBytes[this.#first]!;
      this.#pieces[this.#first++] = ''; // let it go now, not at the next compaction
      this.#cut = true;
    }
    if (this.#first > 1024 && this.#first * 2 > this.#pieces.length) {
      this.#pieces = this.#pieces.slice(this.#first);
      this.#pieceBytes = this.#pieceBytes.slice(this.#first);
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
