/**
 * The head and the tail of a text that arrives in pieces, kept within a byte bound as it comes:
 * what exec keeps of a stream past `maxBuffer`, and what a tool call keeps of its progress. The
 * one streaming form of the head-and-tail rule (head-tail.ts cuts a text held whole).
 *
 * Invariants (each `add` costs O(size of its piece), amortised, whatever was kept before it):
 * 1. The head is the text's first bytes, at most `headCap`, ending on a character boundary; once
 *    a piece goes past it, every later piece goes to the tail only, so the order holds, and the
 *    bytes the head left unused go to the tail's cap: a text within both caps is kept whole.
 * 2. The tail is `#chunks[#first..]` (oldest first) then `#open` (the latest small pieces, not yet
 *    one chunk); `#tailBytes` counts both. A chunk is dropped whole, and only while the rest still
 *    holds `tailCap` bytes, so the tail holds at least the latest `tailCap` bytes after the head and
 *    at most `tailCap` plus one chunk (a piece bigger than `tailCap` is cut to its last `tailCap`
 *    bytes first, as an own copy). `kept` cuts only the first chunk, never flattening the rest.
 * 3. `#dropped` counts the bytes dropped between head and tail: head + dropped + tail is the whole.
 * 4. Pieces shorter than `#chunkBytes` are gathered in `#open` first, so a relay of one character
 *    at a time makes about `tailCap / #chunkBytes` chunks, not one a piece; the chunk list is
 *    compacted when half of it is dropped entries, so dropping from its front is O(1) amortised.
 * 5. A part of a bigger string is kept as an own copy (`ownCopy`): a slice would keep the caller's
 *    whole string alive.
 */

import { headBytes, headChars, ownCopy, tailBytes, tailChars, utf8Bytes } from './head-tail.js';

/** Pieces shorter than this (or than the tail's cap, when smaller) are gathered before they are kept. */
const CHUNK_BYTES = 1024;

/** What a keeper holds: all of the text (`omittedBytes` 0), or its head and tail and the bytes between. */
export interface KeptText {
  readonly head: string;
  readonly tail: string;
  /** The bytes of the text neither end holds; 0 when `head + tail` is the whole text. */
  readonly omittedBytes: number;
}

/** See the file comment. */
export class HeadTailKeeper {
  readonly #headCap: number;
  /** The tail's bytes: `tailCap`, plus what the head left of its cap once it is full (invariant 1). */
  #tailCap: number;
  readonly #chunkBytes: number;
  #head = '';
  #headBytes = 0;
  /** A piece went past the head: later text goes to the tail only (invariant 1). */
  #headFull = false;
  #chunks: Array<{ text: string; bytes: number }> = [];
  #first = 0;
  #open: string[] = [];
  #openBytes = 0;
  #tailBytes = 0;
  /** Bytes dropped between the head and the tail (invariant 3). */
  #dropped = 0;

  /** @param headCap the head's bytes; @param tailCap the tail's (`splitBudget` gives both from one bound). */
  constructor(headCap: number, tailCap: number) {
    this.#headCap = headCap;
    this.#tailCap = tailCap;
    this.#chunkBytes = Math.max(1, Math.min(CHUNK_BYTES, tailCap));
  }

  /** Every byte added so far (UTF-8). */
  get bytes(): number {
    return this.#headBytes + this.#dropped + this.#tailBytes;
  }

  /** Keep `text` (`bytes`: its UTF-8 size, when the caller has counted it). */
  add(text: string, bytes: number = utf8Bytes(text)): void {
    if (text === '') return;
    let rest = text;
    let restBytes = bytes;
    if (!this.#headFull) {
      const room = this.#headCap - this.#headBytes;
      if (bytes <= room) {
        this.#head += text;
        this.#headBytes += bytes;
        return;
      }
      // n UTF-16 units hold at least n bytes: the slice holds the head's room.
      const head = headBytes(headChars(text.slice(0, Math.max(0, room))), Math.max(0, room));
      this.#head += ownCopy(head.text);
      this.#headBytes += head.bytes;
      this.#headFull = true;
      // What the head could not use (a character that did not fit) goes to the tail: a text within
      // headCap + tailCap bytes is then always kept whole.
      this.#tailCap += this.#headCap - this.#headBytes;
      rest = text.slice(head.text.length);
      restBytes = bytes - head.bytes;
    }
    this.#addToTail(rest, restBytes);
  }

  /** The text kept (invariant 2): `tail` is exactly its latest `tailCap` bytes, on a character boundary. */
  kept(): KeptText {
    let tail = '';
    let keptBytes = 0;
    const excess = this.#tailBytes - this.#tailCap;
    for (let i = this.#first; i < this.#chunks.length; i++) {
      let { text, bytes } = this.#chunks[i]!;
      // Only the first chunk is cut (invariant 2): it alone holds the excess.
      if (i === this.#first && excess > 0) ({ text, bytes } = tailBytes(tailChars(text), bytes - excess));
      tail += text;
      keptBytes += bytes;
    }
    for (const piece of this.#open) tail += piece;
    keptBytes += this.#openBytes;
    return { head: this.#head, tail, omittedBytes: this.#dropped + this.#tailBytes - keptBytes };
  }

  #addToTail(text: string, bytes: number): void {
    if (bytes > this.#tailCap) {
      // It alone fills the tail: everything kept before it goes, and it is cut now (invariant 5).
      const kept = tailBytes(tailChars(text.slice(-Math.max(1, this.#tailCap))), this.#tailCap);
      this.#dropped += this.#tailBytes + bytes - kept.bytes;
      this.#chunks = kept.bytes > 0 ? [{ text: ownCopy(kept.text), bytes: kept.bytes }] : [];
      this.#first = 0;
      this.#open = [];
      this.#openBytes = 0;
      this.#tailBytes = kept.bytes;
      return;
    }
    this.#tailBytes += bytes;
    if (bytes < this.#chunkBytes || this.#openBytes > 0) {
      this.#open.push(text);
      this.#openBytes += bytes;
      if (this.#openBytes < this.#chunkBytes) return this.#dropOld();
      // One flat string: the pieces it joins are let go.
      text = this.#open.join('');
      bytes = this.#openBytes;
      this.#open = [];
      this.#openBytes = 0;
    }
    this.#chunks.push({ text, bytes });
    this.#dropOld();
  }

  /** Drop whole chunks from the front while the rest still holds `tailCap` bytes (invariants 2, 4). */
  #dropOld(): void {
    while (this.#first < this.#chunks.length && this.#tailBytes - this.#chunks[this.#first]!.bytes >= this.#tailCap) {
      const { bytes } = this.#chunks[this.#first]!;
      this.#chunks[this.#first++] = DROPPED; // let its text go now, not at the compaction
      this.#tailBytes -= bytes;
      this.#dropped += bytes;
    }
    if (this.#first > 64 && this.#first * 2 > this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#first);
      this.#first = 0;
    }
  }
}

const DROPPED = Object.freeze({ text: '', bytes: 0 });
