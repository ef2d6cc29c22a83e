/**
 * The ledger's index by session: where each session's lines are in the file, as byte ranges, so
 * `Ledger.entries({ sessionId })` reads and parses that session's lines and no other's.
 *
 * Memory: per session its id and its ranges (session-ranges.ts: a run of consecutive lines of the
 * session is one range, of 16 bytes while the session has few, 3 to 6 bytes once it has many),
 * never the entries themselves. So memory grows with the runs: when many sessions write at once,
 * with the lines (one run a line).
 */

import type { LedgerEntry } from './entry.js';
import { RangeCursor, SessionRanges, type RangesSnapshot } from './session-ranges.js';

export type { RangesSnapshot } from './session-ranges.js';

/** Ranges closer than this are read with one `pread` (the bytes between are read, not parsed). */
const READ_GAP = 16 * 1024;
/** A single `pread` never reads more than this, unless one range alone is longer. */
const READ_SPAN = 1024 * 1024;

/** A seq mark is kept at the first line this many bytes past the previous mark. */
const MARK_BYTES = 64 * 1024;

/**
 * Byte ranges of every session's lines, and a seq mark every `MARK_BYTES` of the whole ledger
 * (where the line of a seq starts), so a page after `afterSeq` skips the ranges before it unread:
 * a client that follows a long session reads what is new, not the session again (256 bytes a MiB of ledger).
 */
export class SessionIndex {
  readonly #sessions = new Map<string, SessionRanges>();
  /** The seq and start offset of each mark, in file order (so in seq order). */
  #markSeqs: number[] = [];
  #markOffsets: number[] = [];

  /** Record that the line of `sessionId` with `seq` occupies bytes [start, end) (lines are added in file order). */
  add(sessionId: string, start: number, end: number, seq: number): void {
    const ranges = this.#sessions.get(sessionId);
    if (ranges === undefined) this.#sessions.set(sessionId, new SessionRanges(start, end));
    else ranges.add(start, end);
    const last = this.#markOffsets.at(-1);
    if (last === undefined || start - last >= MARK_BYTES) {
      this.#markSeqs.push(seq);
      this.#markOffsets.push(start);
    }
  }

  /** An offset no line with a seq above `afterSeq` starts before (0 when no mark says more). */
  offsetAfter(afterSeq: number): number {
    // The last mark whose line is at or before the first line wanted (seq afterSeq + 1).
    let low = 0;
    let high = this.#markSeqs.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#markSeqs[middle]! <= afterSeq + 1) low = middle + 1;
      else high = middle;
    }
    return low === 0 ? 0 : this.#markOffsets[low - 1]!;
  }

  /** The session's ranges as they stand now (later additions are not in it); `undefined` for a session with no line. Cheap: no copy. */
  snapshot(sessionId: string): RangesSnapshot | undefined {
    return this.#sessions.get(sessionId)?.snapshot();
  }

  /** Give back the room kept for growth (after `Ledger.open` read the files: most sessions are done). */
  trim(): void {
    for (const ranges of this.#sessions.values()) ranges.trim();
  }

  /** Forget every range that starts before `offset` (its segment was removed), and every session left with none. */
  prune(offset: number): void {
    const firstKept = this.#markOffsets.findIndex((mark) => mark >= offset);
    const cut = firstKept === -1 ? this.#markOffsets.length : firstKept;
    this.#markSeqs = this.#markSeqs.slice(cut);
    this.#markOffsets = this.#markOffsets.slice(cut);
    for (const [sessionId, ranges] of this.#sessions) {
      const cursor = new RangeCursor(ranges.snapshot());
      let first = cursor.next();
      if (first === undefined || first[0] >= offset) continue;
      while (first !== undefined && first[0] < offset) first = cursor.next();
      if (first === undefined) {
        this.#sessions.delete(sessionId);
        continue;
      }
      const kept = new SessionRanges(first[0], first[1]);
      for (let range = cursor.next(); range !== undefined; range = cursor.next()) kept.add(range[0], range[1]);
      kept.trim();
      this.#sessions.set(sessionId, kept);
    }
  }
}

/** How `readSession` reads the index's offsets (ledger.ts maps them to its segments). */
export interface SessionReader {
  /** `length` bytes at `position`, all within one segment. */
  read(position: number, length: number): Promise<Buffer>;
  /** The end of the segment holding `offset`: one read never crosses it. */
  boundary(offset: number): number;
  /** Ranges that end at or before it are skipped (removed segments, or seqs a page does not want). */
  from: number;
}

/**
 * The entries in the snapshot's ranges, in file order, each given to `visit` until it returns
 * false: reads the ranges with few `pread`s (near ones together) and parses only the lines in
 * them. Throws if a line is not an entry of `sessionId` (the file is not what this ledger wrote).
 */
export async function readSession(reader: SessionReader, where: string, path: string, sessionId: string,
  snapshot: RangesSnapshot, visit: (entry: LedgerEntry) => boolean): Promise<void> {
  const cursor = new RangeCursor(snapshot);
  while (cursor.peek() !== undefined && cursor.peek()![1] <= reader.from) cursor.next();
  let range = cursor.next();
  // A range that goes on past `from` is read from there: `from` is then the start of one of its
  // lines (a mark is a line's start, and a range holds only the session's lines, back to back).
  if (range !== undefined && range[0] < reader.from) range = [reader.from, range[1]];
  for (; range !== undefined; range = cursor.next()) {
    // One read: this range and the next ones while each starts close to the previous end, in the
    // same segment, and the span stays small.
    const spanStart = range[0];
    const boundary = reader.boundary(spanStart);
    const group = [range];
    for (let next = cursor.peek(); next !== undefined; next = cursor.peek()) {
      if (next[0] - group.at(-1)![1] > READ_GAP || next[1] - spanStart > READ_SPAN || next[1] > boundary) break;
      group.push(cursor.next()!);
    }
    if (group.length === 1 && range[1] - range[0] > READ_SPAN) {
      if (!(await readLongRange(reader, range[0], range[1], (bytes, to) => parseLines(bytes, 0, to, sessionId, where, path, visit)))) return;
      continue;
    }
    const bytes = await reader.read(spanStart, group.at(-1)![1] - spanStart);
    for (const [start, end] of group) {
      if (!parseLines(bytes, start - spanStart, end - spanStart, sessionId, where, path, visit)) return;
    }
  }
}

/**
 * A range longer than `READ_SPAN` (a session's lines back to back), read `READ_SPAN` at a time, each
 * slice cut after its last whole line (a longer line is read whole), until `parse` asks to stop: a
 * page of a few entries reads about those, not the rest of the range.
 */
async function readLongRange(reader: SessionReader, start: number, end: number, parse: (bytes: Buffer, to: number) => boolean): Promise<boolean> {
  for (let at = start; at < end;) {
    let length = Math.min(READ_SPAN, end - at);
    let bytes = await reader.read(at, length);
    let whole = at + length === end ? length : bytes.lastIndexOf(0x0a) + 1;
    while (whole === 0) { // one line longer than the slice
      length = Math.min(length * 2, end - at);
      bytes = await reader.read(at, length);
      whole = at + length === end ? length : bytes.lastIndexOf(0x0a) + 1;
    }
    if (!parse(bytes, whole)) return false;
    at += whole;
  }
  return true;
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
