/**
 * One session's byte ranges in the ledger's offsets, kept small (session-index.ts keeps one of these
 * a session): a run of consecutive lines of the session is one range.
 *
 * Invariants:
 * 1. Ranges are in file order (lines are added in file order), which is seq order, and never
 *    touch: a line that starts where the last range ends extends it.
 * 2. A range is stored once it can grow no more (the session's next line starts elsewhere); until
 *    then it is the two numbers `lastStart`/`lastEnd`. What is stored never changes: the first
 *    `PLAIN_RUNS` ranges go to a plain array (pushed to, never rewritten), the rest, once there are
 *    more, to a byte array that replaces it (written past its end only, replaced when it grows). So
 *    a snapshot (the arrays, how much of each is used, the open range) stays what it was while
 *    lines are added, at no copy.
 *
 * Memory: a session of one run costs its object (about 70 bytes); up to `PLAIN_RUNS` runs, 16 bytes
 * a run (a small JS array, as before); past that, a byte array (about 200 bytes of its own) holding
 * per run two unsigned LEB128 varints — the gap from the previous run's end and the run's length,
 * 3 to 6 bytes for lines under 16 KiB and runs under 2 MiB apart — grown by doubling, trimmed by
 * `trim()` (after `Ledger.open`).
 */

/** Runs kept in a plain array before they are packed as varints (a byte array costs ~200 bytes of its own). */
const PLAIN_RUNS = 16;

/** A session's ranges as they stood at one moment (invariant 2). */
export interface RangesSnapshot {
  /** The first stored ranges as [start, end, …]: `plainCount` numbers of `plain`. */
  readonly plain: readonly number[] | undefined;
  readonly plainCount: number;
  /** Or, once packed, every stored range: `used` bytes of `bytes`. */
  readonly bytes: Uint8Array | undefined;
  readonly used: number;
  /** The last range, not stored yet. */
  readonly lastStart: number;
  readonly lastEnd: number;
}

/** One session's ranges (invariants 1 and 2). */
export class SessionRanges {
  /** Stored ranges as [start, end, …] while there are at most PLAIN_RUNS; `undefined` before the first and once packed. */
  #plain: number[] | undefined;
  /** Stored ranges as varints once packed; `undefined` before. */
  #bytes: Uint8Array | undefined;
  #used = 0;
  /** The end of the last packed range (the next one's gap is counted from it). */
  #packedEnd = 0;
  #lastStart: number;
  #lastEnd: number;

  constructor(start: number, end: number) {
    this.#lastStart = start;
    this.#lastEnd = end;
  }

  /** The line at [start, end) (after every line added before: invariant 1). */
  add(start: number, end: number): void {
    if (start === this.#lastEnd) {
      this.#lastEnd = end;
      return;
    }
    this.#store(this.#lastStart, this.#lastEnd);
    this.#lastStart = start;
    this.#lastEnd = end;
  }

  snapshot(): RangesSnapshot {
    return {
      plain: this.#plain, plainCount: this.#plain?.length ?? 0, bytes: this.#bytes, used: this.#used,
      lastStart: this.#lastStart, lastEnd: this.#lastEnd,
    };
  }

  /** Drop the room kept for growth (new arrays: invariant 2). */
  trim(): void {
    if (this.#plain !== undefined) this.#plain = this.#plain.slice();
    if (this.#bytes !== undefined && this.#bytes.length > this.#used + 16) this.#bytes = this.#bytes.slice(0, this.#used + 16);
  }

  #store(start: number, end: number): void {
    if (this.#bytes === undefined) {
      if (this.#plain === undefined) {
        this.#plain = [start, end];
        return;
      }
      if (this.#plain.length < PLAIN_RUNS * 2) {
        this.#plain.push(start, end);
        return;
      }
      // Packed into a new array; the plain one is left as it was for the snapshots holding it.
      const plain = this.#plain;
      this.#plain = undefined;
      this.#bytes = new Uint8Array(PLAIN_RUNS * 8);
      for (let i = 0; i < plain.length; i += 2) this.#pack(plain[i]!, plain[i + 1]!);
    }
    this.#pack(start, end);
  }

  #pack(start: number, end: number): void {
    this.#put(start - this.#packedEnd);
    this.#put(end - start);
    this.#packedEnd = end;
  }

  /** Append `value` as an unsigned LEB128 varint (arithmetic, not bit operations: offsets pass 2^32). */
  #put(value: number): void {
    if (this.#used + 8 > this.#bytes!.length) {
      // A new array (invariant 2): a snapshot keeps reading the old one.
      const grown = new Uint8Array(this.#bytes!.length * 2);
      grown.set(this.#bytes!.subarray(0, this.#used));
      this.#bytes = grown;
    }
    const bytes = this.#bytes!;
    while (value >= 0x80) {
      bytes[this.#used++] = (value % 0x80) + 0x80;
      value = Math.floor(value / 0x80);
    }
    bytes[this.#used++] = value;
  }
}

/** Reads a snapshot's ranges in order, each as [start, end): `peek` the next one, `next` to take it. */
export class RangeCursor {
  readonly #snapshot: RangesSnapshot;
  #plainAt = 0;
  #bytesAt = 0;
  #packedEnd = 0;
  #lastTaken = false;
  #peeked: [number, number] | undefined;

  constructor(snapshot: RangesSnapshot) {
    this.#snapshot = snapshot;
  }

  peek(): [number, number] | undefined {
    this.#peeked ??= this.#read();
    return this.#peeked;
  }

  next(): [number, number] | undefined {
    const range = this.peek();
    this.#peeked = undefined;
    return range;
  }

  #read(): [number, number] | undefined {
    const { plain, plainCount, bytes, used, lastStart, lastEnd } = this.#snapshot;
    if (this.#plainAt < plainCount) {
      const range: [number, number] = [plain![this.#plainAt]!, plain![this.#plainAt + 1]!];
      this.#plainAt += 2;
      return range;
    }
    if (this.#bytesAt < used) {
      const start = this.#packedEnd + this.#get(bytes!);
      const end = start + this.#get(bytes!);
      this.#packedEnd = end;
      return [start, end];
    }
    if (this.#lastTaken) return undefined;
    this.#lastTaken = true;
    return [lastStart, lastEnd];
  }

  #get(bytes: Uint8Array): number {
    let value = 0;
    for (let scale = 1; ; scale *= 0x80) {
      const byte = bytes[this.#bytesAt++]!;
      value += (byte % 0x80) * scale;
      if (byte < 0x80) return value;
    }
  }
}
