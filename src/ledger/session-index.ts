/**
 * The ledger's index by session: where each session's lines are in the file, as byte ranges, so
 * `Ledger.entries({ sessionId })` reads and parses that session's lines and no other's.
 *
 * Memory: two numbers per run of consecutive lines of one session (adjacent lines merge into one
 * range), never the entries themselves; a session id is held once. The ranges of a session are in
 * file order, which is seq order.
 */

import type { FileHandle } from 'node:fs/promises';
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
}

/**
 * The entries in the snapshot's ranges, in file order: reads the ranges with few `pread`s (near
 * ones together) and parses only the lines in them. Throws if a line is not an entry of `sessionId`
 * (the file is not what this ledger wrote).
 */
export async function readSession(handle: FileHandle, where: string, path: string, sessionId: string,
  { ranges, count, lastEnd }: RangesSnapshot): Promise<LedgerEntry[]> {
  const end = (i: number) => (i === count - 1 ? lastEnd : ranges[i]!);
  const entries: LedgerEntry[] = [];
  for (let i = 0; i < count;) {
    // One read: ranges i, i+2, … while the next starts close to the previous end and the span stays small.
    const spanStart = ranges[i]!;
    let j = i;
    while (j + 2 < count && ranges[j + 2]! - end(j + 1) <= READ_GAP && end(j + 3) - spanStart <= READ_SPAN) j += 2;
    const bytes = await readExactly(handle, spanStart, end(j + 1) - spanStart, where, path);
    for (let k = i; k <= j; k += 2) parseLines(bytes, ranges[k]! - spanStart, end(k + 1) - spanStart, sessionId, where, path, entries);
    i = j + 2;
  }
  return entries;
}

async function readExactly(handle: FileHandle, position: number, length: number, where: string, path: string): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  for (let offset = 0; offset < length;) {
    const { bytesRead } = await handle.read(buffer, offset, length - offset, position + offset);
    if (bytesRead === 0) throw new Error(`${where}: "${path}" is shorter than this ledger wrote it (was it truncated by another program?)`);
    offset += bytesRead;
  }
  return buffer;
}

/** Parse the complete lines in bytes [from, to) into `out`. */
function parseLines(bytes: Buffer, from: number, to: number, sessionId: string, where: string, path: string, out: LedgerEntry[]): void {
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
    out.push(entry);
    start = stop + 1;
  }
}
