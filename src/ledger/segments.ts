/**
 * A ledger's segments: with `Ledger.open(path, { segmentBytes })` the file at `path` is sealed once
 * it holds `segmentBytes` (renamed `<path>.<firstSeq>-<lastSeq>`, synced whole before) and a new
 * file at `path` goes on. Sealed segments never change; the oldest can be removed (by hand, or with
 * `ledger.removeSegments(throughSeq)`) to bound a long-lived server's disk and open time.
 *
 * Offsets: the session index (session-index.ts) holds one offset space for every segment: a
 * segment's lines sit at its `base` plus their offset in its file, and the next segment's base is
 * one past its end, so two segments' lines never merge into one range.
 */

import { open as openFile, readdir, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** A sealed segment of a ledger, as `ledger.segments()` lists it. */
export interface LedgerSegment {
  /** The segment's file: `<path>.<firstSeq>-<lastSeq>`. */
  readonly path: string;
  /** The seq of its first and last entries. */
  readonly firstSeq: number;
  readonly lastSeq: number;
  /** Its size in bytes. */
  readonly bytes: number;
}

/** A segment as the ledger keeps it: where its lines sit in the index's offsets. */
export interface PlacedSegment extends LedgerSegment {
  readonly base: number;
}

/** The name a segment of `path` holding seqs firstSeq…lastSeq is sealed under. */
export function sealedPath(path: string, firstSeq: number, lastSeq: number): string {
  return `${path}.${firstSeq}-${lastSeq}`;
}

/** The sealed segments of the ledger at `path` (its real path), oldest first, as the directory holds them now. */
export async function listSegments(path: string): Promise<LedgerSegment[]> {
  const dir = dirname(path);
  const prefix = `${basename(path)}.`;
  const segments: LedgerSegment[] = [];
  for (const name of await readdir(dir)) {
    if (!name.startsWith(prefix)) continue;
    const match = /^(\d+)-(\d+)$/.exec(name.slice(prefix.length));
    if (match === null) continue;
    const full = join(dir, name);
    const info = await stat(full);
    if (!info.isFile()) continue;
    segments.push({ path: full, firstSeq: Number(match[1]), lastSeq: Number(match[2]), bytes: info.size });
  }
  return segments.sort((a, b) => a.firstSeq - b.firstSeq);
}

/**
 * Makes a rename or a new file in `dir` durable (`fsync` of the directory). Where a directory
 * cannot be opened or synced (Windows), there is nothing more to do.
 */
export async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await openFile(dir, 'r');
    await handle.sync();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL' && code !== 'EACCES') throw error;
  } finally {
    await handle?.close();
  }
}
