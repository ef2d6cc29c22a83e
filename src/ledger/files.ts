/**
 * The files of one ledger: the one being written, at its path, and the sealed segments beside it
 * (segments.ts), with where each sits in the session index's offsets; and the rules that keep a
 * read consistent without ever holding an append:
 *
 * 1. A read sees the files standing still: it starts once no sealing and no removal is under way,
 *    and takes then the list of segments and the handle of the file being written.
 * 2. A sealing never waits for a read: a read reads the file being written through its handle,
 *    which a sealing renames (the handle follows the file) and does not close while a read holds
 *    it (the last read closes it); the segments the read listed are never renamed. So the append
 *    that crosses `segmentBytes` (another session's stop intent, say) is written and flushed while
 *    a long `entries()` runs, and that read returns what the files held when it began.
 * 3. A removal of segments waits for the reads under way (a read opens a segment by path: an
 *    unlinked one is gone), and for a sealing under way. Retention is not on a stop's path.
 */

import { open as openFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { readAt, withFile } from './file.js';
import type { LedgerEntry } from './entry.js';
import { scanFile } from './scan.js';
import { syncDirectory, type LedgerSegment, type PlacedSegment } from './segments.js';
import { readSession, type RangesSnapshot, type SessionReader } from './session-index.js';
import type { LedgerFilter } from './store.js';
import type { Rotate } from './writer.js';

export class LedgerFiles {
  /** The path as given to `open` (for messages), and its real path (segments are sealed next to it). */
  readonly path: string;
  readonly real: string;
  /** `dev:ino` of the file being written. */
  #fileKey: string;
  /** The sealed segments, oldest first. */
  readonly #segments: PlacedSegment[];
  /** The segments whose sealing is queued (their last line is queued, their file not yet renamed), oldest first. */
  readonly #sealing: PlacedSegment[] = [];
  /** False once a sealing failed after its rename: every line written is in the segments, and no file is being written. */
  #current = true;
  /** A removal of segments under way (rule 3); settles when it ends and never rejects (its caller gets the failure). */
  #change: Promise<void> | undefined;
  /** A sealing under way (rule 2: reads wait for it, it waits for no read); settles when it ends, never rejects. */
  #sealUnderWay: Promise<void> | undefined;
  /** Reads under way, and the removals waiting for them to end. */
  #reads = 0;
  #readsDone: (() => void)[] = [];
  /** The handle reads use for the file being written; `undefined` while a sealing has none open, or once closed. */
  #handle: FileHandle | undefined;
  /** How many reads under way hold each handle (rule 2). */
  readonly #holds = new Map<FileHandle, number>();
  /** Handles of sealed files still held by a read: the last one closes it. */
  readonly #retired = new Set<FileHandle>();
  /** Told when the file being written is replaced by a new one (its `dev:ino` changes). */
  readonly #onReplaced: (oldKey: string, newKey: string) => void;

  constructor(path: string, real: string, fileKey: string, handle: FileHandle, segments: PlacedSegment[],
    onReplaced: (oldKey: string, newKey: string) => void) {
    this.path = path;
    this.#handle = handle;
    this.real = real;
    this.#fileKey = fileKey;
    this.#segments = segments;
    this.#onReplaced = onReplaced;
  }

  /** `dev:ino` of the file being written. */
  get fileKey(): string { return this.#fileKey; }

  /** The sealed segments, oldest first. */
  get segments(): readonly PlacedSegment[] { return this.#segments; }

  /** Where the file being written starts in the index's offsets: a segment whose sealing is queued is still that file. */
  currentBase(activeBase: number): number {
    return this.#sealing[0]?.base ?? activeBase;
  }

  /** Queues the sealing of the file being written as `segment`; returns what the writer calls when it gets there. */
  seal(segment: PlacedSegment): Rotate {
    this.#sealing.push(segment);
    return (old) => {
      // Rule 2: no wait for the reads (nor for a removal, which waits for them).
      const run = this.#sealNow(segment, old);
      const settled: Promise<void> = run.then(noop, noop).then(() => { if (this.#sealUnderWay === settled) this.#sealUnderWay = undefined; });
      this.#sealUnderWay = settled;
      return run;
    };
  }

  /** Rename the file being written as `segment`, open the next one, and return its handle. */
  async #sealNow(segment: PlacedSegment, old: FileHandle): Promise<FileHandle> {
    await rename(this.real, segment.path);
    this.#sealing.shift();
    this.#segments.push(segment);
    // Until the next file is open, the segment holds every line: a failure from here leaves no file being written.
    this.#current = false;
    this.#handle = undefined;
    await this.#retire(old);
    const handle = await openFile(this.real, 'a+');
    let key: string;
    try {
      const stat = await handle.stat();
      await syncDirectory(dirname(this.real));
      key = `${stat.dev}:${stat.ino}`;
    } catch (error) {
      // The writer keeps no handle it was not given: this one is closed here, or never.
      await handle.close().catch(() => {});
      throw error;
    }
    this.#onReplaced(this.#fileKey, key);
    this.#fileKey = key;
    this.#current = true;
    this.#handle = handle;
    return handle;
  }

  /** The handle of a sealed file: closed now when no read holds it, else by the last read that does (rule 2). */
  async #retire(handle: FileHandle): Promise<void> {
    if ((this.#holds.get(handle) ?? 0) === 0) await handle.close();
    else this.#retired.add(handle);
  }

  /** The file being written is closed (the ledger closed): later reads read it by path. */
  closed(): void {
    this.#handle = undefined;
  }

  /**
   * Removes the sealed segments whose entries all have `seq <= throughSeq`, oldest first;
   * `removed(firstKeptBase, lastSeq)` (the first kept segment's base, the last removed one's last
   * seq) then prunes the index and the turn ids. On a failure, the ones removed before it are gone
   * (and pruned) and the others stay listed.
   */
  remove(throughSeq: number, removed: (firstKeptBase: number | undefined, lastSeq: number) => void): Promise<LedgerSegment[]> {
    return this.#alone(async () => {
      while (this.#sealUnderWay !== undefined) await this.#sealUnderWay;
      const gone: LedgerSegment[] = [];
      try {
        // Oldest first, and a segment leaves the list only once its file is gone: a failure keeps the rest as they were.
        while (this.#segments.length > 0 && this.#segments[0]!.lastSeq <= throughSeq) {
          const { path, firstSeq, lastSeq, bytes } = this.#segments[0]!;
          await unlink(path).catch((error: NodeJS.ErrnoException) => { if (error.code !== 'ENOENT') throw error; });
          this.#segments.shift();
          gone.push({ path, firstSeq, lastSeq, bytes });
        }
      } finally {
        if (gone.length > 0) removed(this.#segments[0]?.base, gone.at(-1)!.lastSeq);
      }
      if (gone.length > 0) await syncDirectory(dirname(this.real));
      return gone;
    });
  }

  /**
   * Runs `read` with the files standing still (rule 1), given the handle of the file being written
   * (`undefined` when none is open: read it by path), which stays open until `read` ends (rule 2).
   */
  async reading<T>(read: (handle: FileHandle | undefined) => Promise<T>): Promise<T> {
    while (this.#change !== undefined || this.#sealUnderWay !== undefined) await (this.#change ?? this.#sealUnderWay);
    this.#reads += 1;
    const handle = this.#handle;
    if (handle !== undefined) this.#holds.set(handle, (this.#holds.get(handle) ?? 0) + 1);
    try {
      return await read(handle);
    } finally {
      this.#reads -= 1;
      if (handle !== undefined) this.#letGo(handle);
      if (this.#reads === 0) for (const done of this.#readsDone.splice(0)) done();
    }
  }

  /**
   * The entries `filter` (checked) asks for, in seq order, read with the files standing still
   * (rule 1). Those of one session are read through its `ranges` in the session index (`undefined`:
   * it has none) while `indexed()` gives where the file being written starts in the index's
   * offsets, which it does while they are exact (ledger.ts, invariant 9); otherwise every file is.
   * `marked`: an offset no line after `afterSeq` starts before (`SessionIndex.offsetAfter`).
   */
  entries(filter: LedgerFilter, ranges: RangesSnapshot | undefined, indexed: () => number | undefined, marked: number): Promise<LedgerEntry[]> {
    const { sessionId, turnId, afterSeq = 0, limit = Infinity } = filter;
    return this.reading(async (handle) => {
      const out: LedgerEntry[] = [];
      const visit = (e: LedgerEntry): boolean => {
        if (e.seq > afterSeq && (turnId === undefined || e.turnId === turnId) && (sessionId === undefined || e.sessionId === sessionId)) out.push(e);
        return out.length < limit;
      };
      const currentBase = sessionId !== undefined && handle !== undefined ? indexed() : undefined;
      if (sessionId !== undefined && handle !== undefined && currentBase !== undefined) {
        if (ranges === undefined) return [];
        const from = Math.max(this.#segments.find((s) => s.lastSeq > afterSeq)?.base ?? currentBase, marked);
        await readSession(this.reader(handle, currentBase, from), 'Ledger.entries', this.path, sessionId, ranges, visit);
        return out;
      }
      // Every file (a torn tail can only follow a failed write, ledger.ts invariant 4: it is skipped).
      await this.scan(afterSeq, handle, visit);
      return out;
    });
  }

  /** A read is done with `handle`: the last read of a sealed file's handle closes it. */
  #letGo(handle: FileHandle): void {
    const holds = this.#holds.get(handle)! - 1;
    if (holds > 0) {
      this.#holds.set(handle, holds);
      return;
    }
    this.#holds.delete(handle);
    if (this.#retired.delete(handle)) void handle.close().catch(noop);
  }

  /**
   * How `readSession` reads the index's offsets: the sealed segments by path, the file being
   * written through `handle` (it starts at `currentBase`). Ranges before `from` are skipped.
   */
  reader(handle: FileHandle, currentBase: number, from: number): SessionReader {
    const segments = this.#segments.slice();
    const segmentOf = (offset: number) => (offset >= currentBase ? undefined : segments.findLast((s) => s.base <= offset));
    return {
      from,
      boundary: (offset) => {
        const segment = segmentOf(offset);
        return segment === undefined ? Infinity : segment.base + segment.bytes;
      },
      read: async (position, length) => {
        const segment = segmentOf(position);
        const bytes = segment === undefined
          ? await readAt(handle, position - currentBase, length)
          : await withFile(segment.path, (file) => readAt(file, position - segment.base, length));
        if (bytes.length < length) {
          throw new Error(`Ledger.entries: "${segment?.path ?? this.path}" is shorter than this ledger wrote it (was it truncated by another program?)`);
        }
        return bytes;
      },
    };
  }

  /**
   * Streams every entry of the segments holding seqs after `afterSeq`, then of the file being
   * written (through `handle`, or by its path once closed: refused if it is no longer that file),
   * to `visit` until it returns false. A torn tail of the file being written is skipped; after a
   * sealing that failed past its rename there is no file being written (`handle` is closed then).
   */
  async scan(afterSeq: number, handle: FileHandle | undefined, visit: (entry: LedgerEntry) => boolean): Promise<void> {
    let previousSeq = 0;
    // As the read began (rule 1): a sealing during the scan leaves `handle` reading the same file.
    const current = this.#current;
    for (const segment of this.#segments.slice()) {
      if (segment.lastSeq <= afterSeq) continue;
      const scanned = await withFile(segment.path, (file, size) =>
        scanFile(file, size, { where: 'Ledger.entries', path: segment.path, previousSeq, tail: false, onEntry: visit }));
      if (scanned.stopped) return;
      previousSeq = scanned.lastSeq;
    }
    if (!current) return;
    const scan = (file: FileHandle, size: number) =>
      scanFile(file, size, { where: 'Ledger.entries', path: this.path, previousSeq, tail: true, onEntry: visit });
    if (handle !== undefined) await scan(handle, (await handle.stat()).size);
    else await withFile(this.path, scan, this.#fileKey);
  }

  /** Runs `change` (a removal) once no read and no other removal is under way; reads and removals that come meanwhile wait for it. */
  async #alone<T>(change: () => Promise<T>): Promise<T> {
    while (this.#change !== undefined) await this.#change;
    const run = (async () => {
      if (this.#reads > 0) await new Promise<void>((resolve) => { this.#readsDone.push(resolve); });
      return change();
    })();
    // `run`'s failure is its caller's (the writer, `removeSegments`); the promise the others wait on
    // only says it ended, so a failed change is never an unhandled rejection.
    const settled: Promise<void> = run.then(noop, noop).then(() => { if (this.#change === settled) this.#change = undefined; });
    this.#change = settled;
    return run;
  }
}

function noop(): void {}
