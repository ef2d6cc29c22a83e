/**
 * The ledger's index by session: where each session's lines are in the file, as byte ranges, so
 * `Ledger.entries({ sessionId })` reads and parses that session's lines and no other's.
 *
 * Memory: two numbers per run of consecutive lines of one session (adjacent lines merge into one
 * range), never the entries themselves; a session id is held once. The ranges of a session are in
 * file order, which is seq order.
 */

import type { LedgerEntry } from './entry.js';

/** Ranges closer than this are read with one `pread` (the bytes between are read, not parsed). */
const READ_GAP = 16 * 1024;
/** A single `pread` never reads more than this, unless one range alone is longer. */
const READ_SPAN = 1024 * 1024;

/** A session's ranges as they stood at one moment: `count` numbers of `ranges`, the last end `lastEnd`. */
export interface RangesSnapshot {
  readonly ranges: readonly number[];
  readonly count: number;
  readonly lastEnd: number;
}

/** Byte ranges of every session's lines. */
export class SessionIndex {
  /** sessionId → [start0, end0, start1, end1, …], `end` exclusive, in file order. */
  readonly #sessions = new Map<string, number[]>();

  /** Record that the line of `sessionId` occupies bytes [start, end) (lines are added in file order). */
  add(sessionId: string, start: number, end: number): void {
    const ranges = this.#sessions.get(sessionId);
    if (ranges === undefined) this.#sessions.set(sessionId, [start, end]);
    else if (ranges[ranges.length - 1] === start) ranges[ranges.length - 1] = end;
    else ranges.push(start, end);
  }

  /**
   * The session's ranges as they stand now (later additions are not in it); `undefined` for a
   * session with no line. Cheap: the array is shared, only its length and last end are kept.
   */
  snapshot(sessionId: string): RangesSnapshot | undefined {
    const ranges = this.#sessions.get(sessionId);
    if (ranges === undefined) return undefined;
    return { ranges, count: ranges.length, lastEnd: ranges[ranges.length - 1]! };
  }

  /** Forget every range that starts before `offset` (its segment was removed). */
  prune(offset: number): void {
    for (const [sessionId, ranges] of this.#sessions) {
      let keep = 0;
      while (keep < ranges.length && ranges[keep]! < offset) keep += 2;
      if (keep === ranges.length) this.#sessions.delete(sessionId);
      else if (keep > 0) this.#sessions.set(sessionId, ranges.slice(keep));
    }
  }
}

/** How `readSession` reads the index's offsets (ledger.ts maps them to its segments). */
export interface SessionReader {
  /** `length` bytes at `position`, all within one segment. */
  read(position: number, length: number): Promise<Buffer>;
  /** The end of the segment holding `offset`: one read never crosses it. */
  boundary(offset: number): number;
  /** Ranges that start before it are skipped (removed segments, or seqs a page does not want). */
  from: number;
}

/**
 * The entries in the snapshot's ranges, in file order, each given to `visit` until it returns
 * false: reads the ranges with few `pread`s (near ones together) and parses only the lines in
 * them. Throws if a line is not an entry of `sessionId` (the file is not what this ledger wrote).
 */
export async function readSession(reader: SessionReader, where: string, path: string, sessionId: string,
  { ranges, count, lastEnd }: RangesSnapshot, visit: (entry: LedgerEntry) => boolean): Promise<void> {
  const end = (i: number) => (i === count - 1 ? lastEnd : ranges[i]!);
  let i = 0;
  while (i < count && ranges[i]! < reader.from) i += 2;
  while (i < count) {
    // One read: ranges i, i+2, … while the next starts close to the previous end, in the same
    // segment, and the span stays small.
    const spanStart = ranges[i]!;
    const boundary = reader.boundary(spanStart);
    let j = i;
    while (j + 2 < count && ranges[j + 2]! - end(j + 1) <= READ_GAP && end(j + 3) - spanStart <= READ_SPAN && end(j + 3) <= boundary) j += 2;
    const bytes = await reader.read(spanStart, end(j + 1) - spanStart);
    for (let k = i; k <= j; k += 2) {
      if (!parseLines(bytes, ranges[k]! - spanStart, end(k + 1) - spanStart, sessionId, where, path, visit)) return;
    }
    i = j + 2;
  }
}

/** Parse the complete lines in bytes [from, to) and visit each; false once `visit` asked to stop. */
function parseLines(bytes: Buffer, from: number, to: number, sessionId: string, where: string, path: string,
  visit: (entry: LedgerEntry) => boolean): boolean {
  for (let start = from; start < to;) {
    const newline = bytes.indexOf(0x0a, start);
    const stop = newline === -1 || newline >= to ? to : newline;
    let entry: LedgerEntry | undefined;
    try {
      entry = JSON.parse(bytes.toString('utf8', start, stop)) as LedgerEntry;
    } catch {
      entry = undefined;
    }
    if (entry?.sessionId !== sessionId) {
      throw new Error(`${where}: "${path}" does not hold at byte ${start} the entry of session ${JSON.stringify(sessionId)} this ledger wrote there ` +
        '(was it changed by another program?)');
    }
    if (!visit(entry)) return false;
    start = stop + 1;
  }
  return true;
}
