/**
 * Reading a ledger file as a stream: its lines in file order, a chunk at a time, each parsed and
 * handed on and then dropped, so reading a file costs memory for one chunk and one line, never the
 * file, and each chunk's read gives the event loop a turn.
 *
 * What a line may be: a JSON object whose `seq` follows the previous line's, whose `sessionId`,
 * `turnId` and `type` are strings (of any length: ids written before ids were bounded still read),
 * in valid UTF-8, at most `LEDGER_MAX_LINE_BYTES` long. What a crash or a power loss leaves at the
 * end of the file being written (`tail`) is cut, not refused:
 * - a last line without its newline, or a last line that is not JSON (a write cut short);
 * - a line holding a NUL byte, and everything after it: JSON never holds a raw NUL, so it is a hole
 *   of zeros where a page the OS had not yet written back was lost. Lines after a hole were written
 *   after the lost page and no sync covered them (a sync would have covered the page too), so no
 *   flush ever promised them.
 * Any other bad line means the file was damaged, edited or shared, and is refused with an Error
 * naming the path, the 1-based line number and the byte where it starts.
 */

import * as buffer from 'node:buffer';
import type { FileHandle } from 'node:fs/promises';
import { LEDGER_MAX_LINE_BYTES } from '../constants.js';
import { describe } from '../errors.js';
import type { LedgerEntry } from './entry.js';
import { readAt } from './file.js';

/** Bytes read per `read`: a chunk is parsed between two turns of the event loop. */
const READ_CHUNK = 1024 * 1024;

/** What a scan cut off the end of the file (the bytes from `at` to the end). */
export interface ScanCut {
  /** The byte where the cut begins: the end of the last line kept. */
  at: number;
  /** How many bytes were cut. */
  bytes: number;
  /** How many lines (or pieces of lines) they held. */
  lines: number;
  /** True when the cut began at a run of NUL bytes (a hole a power loss left), not at a cut-short line. */
  hole: boolean;
}

export interface ScanOptions {
  /** The API that reads, for messages (`Ledger.open`). */
  where: string;
  /** The file's path, for messages. */
  path: string;
  /** The seq before this file's first line (0 for the first file). */
  previousSeq: number;
  /** True for the file being written: a torn tail or a hole is cut (see the header); else every line must be whole. */
  tail: boolean;
  /** Each complete entry, with its line's byte range (newline included); return false to stop the scan there. */
  onEntry(entry: LedgerEntry, start: number, end: number): boolean | void;
}

export interface ScanResult {
  /** Where the last line kept ends. */
  completeBytes: number;
  /** The seq of the last entry read (`previousSeq` when none). */
  lastSeq: number;
  /** What was cut off the tail; undefined when nothing was. */
  cut?: ScanCut;
  /** True when `onEntry` stopped the scan. */
  stopped: boolean;
}

/** `isUtf8` where the runtime has it (Node 18.14+, Bun, Deno); else a fatal decoder. */
const isUtf8: (bytes: Uint8Array) => boolean = typeof buffer.isUtf8 === 'function'
  ? buffer.isUtf8
  : (() => {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    return (bytes: Uint8Array) => {
      try { decoder.decode(bytes); return true; } catch { return false; }
    };
  })();

/** Reads the first `size` bytes of the file open as `handle`, line by line (see the header). */
export async function scanFile(handle: FileHandle, size: number, options: ScanOptions): Promise<ScanResult> {
  const { where, path, tail, onEntry } = options;
  let previousSeq = options.previousSeq;
  let lineStart = 0;
  let lineNumber = 0;
  /** The pieces of the line under way that earlier chunks held. */
  let parts: Buffer[] = [];
  let partBytes = 0;
  const cutHere = async (hole: boolean): Promise<ScanResult> => ({
    completeBytes: lineStart, lastSeq: previousSeq, stopped: false,
    cut: { at: lineStart, bytes: size - lineStart, lines: await countLines(handle, lineStart, size), hole },
  });
  const refuse = (why: string) => new Error(`${where}: "${path}" line ${lineNumber} is not a valid ledger entry ` +
    `(${why}; the line starts at byte ${lineStart}); a ledger is never rewritten, so repair or move the file by hand`);

  for (let position = 0; position < size;) {
    const chunk = await readAt(handle, position, Math.min(READ_CHUNK, size - position));
    if (chunk.length === 0) break;
    position += chunk.length;
    // One check of the chunk's whole lines is far cheaper than one a line; a line is checked alone only if it fails.
    const lastNewline = chunk.lastIndexOf(0x0a);
    const chunkUtf8 = lastNewline !== -1 && isUtf8(chunk.subarray(0, lastNewline));
    for (let from = 0; ;) {
      const newline = chunk.indexOf(0x0a, from);
      if (newline === -1) {
        parts.push(chunk.subarray(from));
        partBytes += chunk.length - from;
        if (partBytes > LEDGER_MAX_LINE_BYTES) {
          lineNumber += 1;
          if (tail && parts.some((part) => part.includes(0))) return cutHere(true);
          throw new Error(`${where}: "${path}" line ${lineNumber} (at byte ${lineStart}) is longer than ${LEDGER_MAX_LINE_BYTES} bytes, ` +
            'the most a ledger line may hold (no ledger writes one); repair or move the file by hand');
        }
        break;
      }
      const spanned = parts.length > 0;
      const line = spanned ? Buffer.concat([...parts, chunk.subarray(from, newline)]) : chunk.subarray(from, newline);
      parts = [];
      partBytes = 0;
      lineNumber += 1;
      const end = lineStart + line.length + 1;
      if (line.length > LEDGER_MAX_LINE_BYTES) {
        throw new Error(`${where}: "${path}" line ${lineNumber} (at byte ${lineStart}) is ${line.length} bytes, longer than ` +
          `${LEDGER_MAX_LINE_BYTES}, the most a ledger line may hold (no ledger writes one); repair or move the file by hand`);
      }
      if (tail && line.includes(0)) return cutHere(true);
      if ((spanned || !chunkUtf8) && !isUtf8(line)) {
        if (tail && end === size) return cutHere(false);
        throw refuse('it holds bytes that are not UTF-8');
      }
      const result = readLine(line.toString('utf8'), previousSeq);
      if ('why' in result) {
        if (tail && result.torn && end === size) return cutHere(false);
        throw refuse(result.why);
      }
      previousSeq = result.entry.seq;
      const start = lineStart;
      lineStart = end;
      if (onEntry(result.entry, start, end) === false) return { completeBytes: lineStart, lastSeq: previousSeq, stopped: true };
      from = newline + 1;
    }
  }
  if (partBytes > 0) {
    lineNumber += 1;
    if (!tail) throw refuse('the file ends inside it: a segment is sealed with whole lines only');
    return cutHere(parts.some((part) => part.includes(0)));
  }
  return { completeBytes: lineStart, lastSeq: previousSeq, stopped: false };
}

/** The line as an entry, or why it is not one; `torn` when it is not even JSON (what a crash leaves). */
function readLine(line: string, previousSeq: number): { entry: LedgerEntry } | { why: string; torn: boolean } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return { why: (e as Error).message, torn: true };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { why: 'not a JSON object', torn: false };
  const v = value as Record<string, unknown>;
  if (!Number.isSafeInteger(v.seq) || (v.seq as number) <= previousSeq) {
    return { why: `seq ${describe(v.seq)} does not follow seq ${previousSeq}`, torn: false };
  }
  if (typeof v.sessionId !== 'string' || typeof v.turnId !== 'string' || typeof v.type !== 'string') {
    return { why: 'sessionId, turnId or type is not a string', torn: false };
  }
  return { entry: value as LedgerEntry };
}

/** Lines (a last one without its newline counted too) in bytes [from, to) of the file. */
async function countLines(handle: FileHandle, from: number, to: number): Promise<number> {
  let lines = 0;
  let last = 0x0a;
  for (let position = from; position < to;) {
    const chunk = await readAt(handle, position, Math.min(READ_CHUNK, to - position));
    if (chunk.length === 0) break;
    position += chunk.length;
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) lines += 1;
    last = chunk[chunk.length - 1]!;
  }
  return last === 0x0a ? lines : lines + 1;
}
