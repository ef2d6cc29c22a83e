/**
 * The files of one ledger: the one being written, at its path, and the sealed segments beside it
 * (segments.ts), with where each sits in the session index's offsets; and the rule that keeps a
 * read consistent: a change of the files (a sealing, a removal) waits for the reads under way, and
 * a read waits for a change under way, so every read sees the files standing still.
 */

import { open as openFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { readAt, withFile } from './file.js';
import type { LedgerEntry } from './entry.js';
import { scanFile } from './scan.js';
import { syncDirectory, type LedgerSegment, type PlacedSegment } from './segments.js';
import type { SessionReader } from './session-index.js';
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
  /** A change of the files under way; settles when it ends and never rejects (its caller gets the failure). */
  #change: Promise<void> | undefined;
  /** Reads under way, and the changes waiting for them to end. */
  #reads = 0;
  #readsDone: (() => void)[] = [];
  /** Told when the file being written is replaced by a new one (its `dev:ino` changes). */
  readonly #onReplaced: (oldKey: string, newKey: string) => void;

  constructor(path: string, real: string, fileKey: string, segments: PlacedSegment[], onReplaced: (oldKey: string, newKey: string) => void) {
    this.path = path;
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
    return (old) => this.#alone(async () => {
      await rename(this.real, segment.path);
      this.#sealing.shift();
      this.#segments.push(segment);
      // Until the next file is open, the segment holds every line: a failure from here leaves no file being written.
      this.#current = false;
      await old.close();
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
      return handle;
    });
  }

  /**
   * Removes the sealed segments whose entries all have `seq <= throughSeq`, oldest first;
   * `removed(firstKept)` then prunes the index. On a failure, the ones removed before it are gone
   * (and pruned) and the others stay listed.
   */
  remove(throughSeq: number, removed: (firstKeptBase: number | undefined) => void): Promise<LedgerSegment[]> {
    return this.#alone(async () => {
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
        if (gone.length > 0) removed(this.#segments[0]?.base);
      }
      if (gone.length > 0) await syncDirectory(dirname(this.real));
      return gone;
    });
  }

  /** Runs `read` with the files standing still (see the header). */
  async reading<T>(read: () => Promise<T>): Promise<T> {
    while (this.#change !== undefined) await this.#change;
    this.#reads += 1;
    try {
      return await read();
    } finally {
      this.#reads -= 1;
      if (this.#reads === 0) for (const done of this.#readsDone.splice(0)) done();
    }
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
    for (const segment of this.#segments.slice()) {
      if (segment.lastSeq <= afterSeq) continue;
      const scanned = await withFile(segment.path, (file, size) =>
        scanFile(file, size, { where: 'Ledger.entries', path: segment.path, previousSeq, tail: false, onEntry: visit }));
      if (scanned.stopped) return;
      previousSeq = scanned.lastSeq;
    }
    if (!this.#current) return;
    const scan = (file: FileHandle, size: number) =>
      scanFile(file, size, { where: 'Ledger.entries', path: this.path, previousSeq, tail: true, onEntry: visit });
    if (handle !== undefined) await scan(handle, (await handle.stat()).size);
    else await withFile(this.path, scan, this.#fileKey);
  }

  /** Runs `change` once no read and no other change is under way; reads and changes that come meanwhile wait for it. */
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
