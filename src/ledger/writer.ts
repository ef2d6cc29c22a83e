/**
 * The one writer of a ledger file (ledger.ts, invariants 1, 3 and 4): the queue of rendered lines,
 * the background pump that writes them, and group commit of the `fdatasync`s that make them durable.
 *
 * Group commit: at most one sync is in flight and at most one is pending. The flushes wait in a
 * `FlushQueue` (group-commit-core.ts) for the seq they were called at to be durable. A sync covers
 * every line written when it begins; a flush that came while it ran and waits for a line past it
 * rides the pending sync, which starts as that one ends and covers every line written by then. So
 * N flushes under way at once cost a number of syncs that grows with how long they keep coming,
 * not with N: a storm of 1,000 stops shares a handful of syncs instead of issuing 2,000.
 *
 * A stop waits for other sessions' work only as far as one file forces it to: its lines follow
 * every line appended before them, so its sync waits for the write in flight and covers it. That
 * write's completion itself starts the sync (and writes what queued up meanwhile), before the
 * appends the write answers go on; those appends, like the flushes a sync answers, are released a
 * slice per turn of the event loop (release.ts), the lines of a turn being stopped first. A long
 * line (a big tool output, a long `say`) is encoded and written `WRITE_SLICE` characters at a
 * time, each slice an asynchronous write, so it never holds the event loop for the whole copy.
 *
 * Segments: a line can carry a rotation (ledger.ts decides when, as it queues the line); the pump
 * then syncs the file, lets the ledger seal it and open the next one, and writes the line there.
 */

import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fdatasyncFd, isDiskFull, writeAll } from './file.js';
import { ReleaseQueue, releaseSliced } from './release.js';
import { FlushQueue } from './group-commit-core.js';
import { isHighSurrogate } from '../base/head-tail.js';
import { renderSafely } from '../base/render.js';
import { LedgerTimeoutError } from '../errors.js';
import { within } from '../base/within.js';

/**
 * Seals the file `old` (synced) and opens the next segment: returns its handle. The writer hands
 * `old` over: the callee closes it once no read uses it.
 */
export type Rotate = (old: FileHandle) => Promise<FileHandle>;

/** The most characters written by one `write` of a long line, and by the synchronous write of a sync (below which a sync writes the queue itself). */
const WRITE_SLICE = 1024 * 1024;

/** A queued line, its seq and turn, and the `append()` promise waiting for it. */
interface PendingLine {
  resolve: () => void;
  reject: (error: unknown) => void;
  line: string;
  /** Set on the first line of a new segment: the file is rotated before it is written. */
  rotate?: Rotate | undefined;
  seq: number;
  turnId: string;
  /** A line of a turn being stopped: released ahead of the others (release.ts). */
  urgent: boolean;
  released: boolean;
}

/** Writes and syncs one ledger file's lines in seq order; a failure breaks it for good. */
export class LedgerWriter {
  readonly #path: string;
  /** The file being written (the newest segment). */
  #handle: FileHandle;
  /** Lines waiting for the next write; taken whole by `#pump` or `#writeQueuedNow`. */
  #queue: PendingLine[] = [];
  /** True while `#pump` runs; a new line then only joins `#queue`. */
  #pumping = false;
  /** True while an asynchronous write of `#pump` is in flight: nothing else may write meanwhile. */
  #writing = false;
  /** Settles when every line queued so far is written (and released) or failed; never rejects (ledger.ts, invariant 3). */
  #lastWrite: Promise<void> = Promise.resolve();
  /** The highest seq whose line the OS has (`write` returned). */
  #writtenSeq: number;
  /** The highest seq an `fdatasync` has covered; -1 until the first, as lines found at open may not be on disk yet. */
  #durableSeq = -1;
  /** Settles when the `fdatasync` in flight (if any) ends; never rejects. */
  #inSync: Promise<void> = Promise.resolve();
  /** The end of the sync in flight (its waits for writes included); `undefined` when none is. */
  #syncing: Promise<void> | undefined;
  /** The flushes, waiting by seq for `#durableSeq` to reach them; its `last` is the highest seq appended (queued) so far. */
  readonly #flushes: FlushQueue;
  /** Set while a starting sync waits for the pump's write in flight: that write's completion calls it. */
  #afterWrite: (() => void) | undefined;
  /** Written lines whose appends are not released yet (release.ts). */
  readonly #releases = new ReleaseQueue();
  /** `fdatasync`s issued, for the ledger's statistics. */
  #syncs = 0;
  /** The first write or sync failure; `undefined` while every one has succeeded (ledger.ts, invariant 4). */
  failure: Error | undefined;

  /** The bound of a flush's wait for the disk, in ms (`Ledger.open`'s `timeoutMs`). */
  readonly #timeoutMs: number;

  constructor(path: string, handle: FileHandle, seq: number, timeoutMs: number) {
    this.#path = path;
    this.#timeoutMs = timeoutMs;
    this.#handle = handle;
    this.#flushes = new FlushQueue(seq, releaseSliced);
    this.#writtenSeq = seq;
  }

  /** The highest seq known to be on disk (-1 before the first sync). */
  get durableSeq(): number { return this.#durableSeq; }
  /** `fdatasync`s issued so far. */
  get syncs(): number { return this.#syncs; }
  /** Settles once every line queued so far is written or failed; never rejects. */
  get lastWrite(): Promise<void> { return this.#lastWrite; }
  /** The file being written: it changes when a segment is sealed. */
  get handle(): FileHandle { return this.#handle; }

  /**
   * Queue `line` under `seq` (the next one); resolves once it is written to the OS. `urgent`: a line
   * of a turn being stopped, released ahead of other sessions' lines (after its turn's earlier ones).
   */
  enqueue(line: string, seq: number, turnId: string, urgent: boolean, rotate?: Rotate): Promise<void> {
    this.#flushes.admit(seq);
    const written = new Promise<void>((resolve, reject) => this.#queue.push({ line, seq, turnId, urgent, rotate, released: false, resolve, reject }));
    this.#lastWrite = written.then(noop, noop);
    if (!this.#pumping) void this.#pump();
    return written;
  }

  /**
   * Resolves once every line queued before the call is on disk, sharing the sync with every other
   * flush under way (see the header). Rejects with the failure once a write or sync failed, and
   * with a `LedgerTimeoutError` when the disk has not confirmed within `timeoutMs` (the sync goes
   * on: the ledger is not broken, and a later flush confirms it).
   */
  flush(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.#durableSeq >= this.#flushes.last) return Promise.resolve();
    const synced = this.#flushes.wait(this.#durableSeq + 1);
    if (this.#syncing === undefined) this.#startSync();
    return rejectLate(synced, this.#timeoutMs, () => new LedgerTimeoutError(`Ledger.flush: the disk holding "${this.#path}" did not confirm ` +
      `the sync within ${this.#timeoutMs} ms (timeoutMs); the sync goes on, and a later flush confirms it`));
  }

  /**
   * Resolves true once no sync is in flight or pending (their fd must stay open until then), or
   * false when one is still under way after `timeoutMs` (the disk stopped answering); never rejects.
   */
  async drain(timeoutMs = Infinity): Promise<boolean> {
    const drained = (async () => {
      while (this.#syncing !== undefined) await this.#syncing.catch(noop);
      return true;
    })();
    if (timeoutMs === Infinity) return drained;
    return within(drained, timeoutMs, () => false);
  }

  /** Start a sync now (none is in flight) covering every line queued so far. */
  #startSync(): void {
    const done = this.#sync(this.#flushes.last);
    this.#syncing = done;
    done.then(() => this.#synced(undefined), (failure: unknown) => this.#synced(failure));
  }

  /**
   * A sync ended: the next one starts if a flush waits for a line it did not cover, in the same
   * synchronous run; then the flushes it made durable are released (a failure rejects them all).
   */
  #synced(failure: unknown): void {
    this.#syncing = undefined;
    if (failure !== undefined) {
      this.#flushes.fail(-Infinity, failure);
      this.#flushes.settle(Infinity);
      return;
    }
    if (this.#flushes.target > this.#durableSeq) this.#startSync();
    this.#flushes.settle(this.#durableSeq + 1);
  }

  /** Waits until every line up to `covers` is written, then syncs (covering whatever is written by then). */
  async #sync(covers: number): Promise<void> {
    // The lines queued so far written by this very call when nothing is in flight: the sync then
    // starts in the same synchronous run, not behind whatever else the microtask queue holds.
    // Else the pump's write in flight (or a long line, or a rotation), as it completes, writes the
    // rest and lets the sync go on. Lines queued after the sync began are not waited for: a
    // steady stream of other sessions' appends never holds it.
    this.#writeQueuedNow();
    while (this.failure === undefined && this.#writtenSeq < covers) {
      await new Promise<void>((resolve) => { this.#afterWrite = resolve; });
    }
    if (this.failure !== undefined) throw this.failure;
    const written = this.#writtenSeq;
    this.#syncs += 1;
    try {
      const synced = fdatasyncFd(this.#handle.fd);
      this.#inSync = synced.then(noop, noop);
      await synced;
    } catch (cause) {
      // A failed sync breaks the ledger as a failed write does: the kernel reports a writeback error
      // once, so a later sync could succeed although lines before it never reached the disk.
      throw this.breakOn(`syncing "${this.#path}" failed, so what was written since the last good sync may not be on disk`, cause);
    }
    if (written > this.#durableSeq) this.#durableSeq = written;
  }

  /** Breaks the ledger for good (invariant 4) and returns the failure: the first one, if it already was. */
  breakOn(what: string, cause: unknown): Error {
    if (this.failure !== undefined) return this.failure;
    const then = isDiskFull(cause)
      ? `the disk is full (${(cause as NodeJS.ErrnoException).code}): free space on the file system holding "${dirname(this.#path)}", then`
      : 'it refuses further appends, and';
    this.failure = new Error(`Ledger: ${what} (${renderSafely(cause)}); ${then} the next Ledger.open repairs the file`, { cause });
    return this.failure;
  }

  /**
   * A sync about to start writes the queued lines itself, synchronously, instead of waiting for
   * the pump's asynchronous write: a small append is a copy into the page cache, far cheaper than
   * the trip through libuv's thread pool. Only when no write is in flight (it would be overtaken:
   * invariant 1), and only as a sync starts, so never while an `fdatasync` runs: on a file system
   * with stable pages a write into a page being written back waits for that I/O, which must not
   * happen on the main thread. Only lines short enough together (`WRITE_SLICE`) and none that
   * starts a segment: the pump writes the rest.
   */
  #writeQueuedNow(): void {
    if (this.#writing || this.#queue.length === 0 || this.failure !== undefined) return;
    let length = 0;
    for (const pending of this.#queue) {
      length += pending.line.length;
      if (length > WRITE_SLICE || pending.rotate !== undefined) return;
    }
    const batch = this.#queue;
    this.#queue = [];
    this.#writeBatch(batch, () => {
      const buffer = Buffer.from(batch.map((pending) => pending.line).join(''), 'utf8');
      // Through the `fs` object, as every write and sync here, so a test's spy sees it.
      for (let offset = 0; offset < buffer.length;) offset += fs.writeSync(this.#handle.fd, buffer, offset, buffer.length - offset, null);
    });
  }

  /** The background writer (invariant 1): writes whatever queued up meanwhile as one batch, until none is left. */
  async #pump(): Promise<void> {
    this.#pumping = true;
    // Let the lines appended in the same synchronous run join the first batch (a stop appends
    // its aborted outputs, marker and status back to back: one write instead of two).
    await undefined;
    while (this.#queue.length > 0) {
      this.#writing = true;
      const rotate = this.#queue[0]!.rotate;
      if (rotate !== undefined && this.failure === undefined) {
        this.#queue[0]!.rotate = undefined;
        await this.#rotate(rotate);
        continue;
      }
      // One batch: the lines up to the next one that starts a segment.
      let count = 1;
      while (count < this.#queue.length && this.#queue[count]!.rotate === undefined) count++;
      const batch = this.#queue.splice(0, count);
      await this.#writeBatch(batch, () => writeSliced(this.#handle, batch));
    }
    this.#pumping = false;
  }

  /** Seal the file (synced first, so a sealed segment is durable whole) and go on in the next one. */
  async #rotate(rotate: Rotate): Promise<void> {
    try {
      await this.#inSync;
      const covers = this.#writtenSeq;
      this.#syncs += 1;
      await fdatasyncFd(this.#handle.fd);
      if (covers > this.#durableSeq) this.#durableSeq = covers;
      this.#handle = await rotate(this.#handle);
    } catch (cause) {
      this.breakOn(`sealing a segment of "${this.#path}" and opening the next failed`, cause);
    }
    this.#writing = false;
    this.#resumeSync();
  }

  /**
   * Write one batch with `write` and settle its appends; a failure breaks the ledger (invariant 4).
   * Returns a promise only when `write` does (the pump's asynchronous write), whose completion
   * also lets a sync waiting for it go on first (see the header).
   */
  #writeBatch(batch: PendingLine[], write: () => Promise<void> | void): Promise<void> | void {
    if (this.failure !== undefined) {
      this.#writing = false;
      for (const pending of batch) pending.reject(this.failure);
      return;
    }
    const fail = (cause: unknown) => {
      this.#writing = false;
      const failure = this.breakOn(`writing to "${this.#path}" failed`, cause);
      for (const pending of batch) pending.reject(failure);
      this.#resumeSync();
    };
    const done = () => {
      this.#writing = false;
      this.#writtenSeq = batch.at(-1)!.seq;
      this.#releases.push(batch);
      this.#resumeSync();
      this.#releases.kick();
    };
    let written: Promise<void> | void;
    try {
      written = write();
    } catch (cause) {
      fail(cause);
      return;
    }
    if (written === undefined) return done();
    return written.then(done, fail);
  }

  /**
   * After a write: a sync that waited for it goes on (its continuation queued before any append's),
   * and what queued up meanwhile is written now, before that continuation runs.
   */
  #resumeSync(): void {
    const resume = this.#afterWrite;
    if (resume === undefined) return;
    this.#afterWrite = undefined;
    resume();
    this.#writeQueuedNow();
  }

}

/**
 * Writes the batch's lines in order: short ones joined into writes of about `WRITE_SLICE`
 * characters, a longer one encoded and written a slice at a time (see the header).
 */
async function writeSliced(handle: FileHandle, batch: readonly PendingLine[]): Promise<void> {
  let joined: string[] = [];
  let joinedLength = 0;
  const writeJoined = async () => {
    if (joined.length === 0) return;
    const text = joined.join('');
    joined = [];
    joinedLength = 0;
    await writeAll(handle, Buffer.from(text, 'utf8'));
  };
  for (const { line } of batch) {
    if (line.length <= WRITE_SLICE) {
      joined.push(line);
      joinedLength += line.length;
      if (joinedLength >= WRITE_SLICE) await writeJoined();
      continue;
    }
    await writeJoined();
    for (let from = 0; from < line.length;) {
      let to = Math.min(from + WRITE_SLICE, line.length);
      // Never between the two halves of a surrogate pair: each would encode as U+FFFD.
      if (to < line.length && isHighSurrogate(line.charCodeAt(to - 1))) to -= 1;
      await writeAll(handle, Buffer.from(line.slice(from, to), 'utf8'));
      from = to;
    }
  }
  await writeJoined();
}

function noop(): void {}

/** `promise`, or at `ms` a rejection with `late()`, whichever comes first (the promise goes on). */
function rejectLate<T>(promise: Promise<T>, ms: number, late: () => unknown): Promise<T> {
  return within(promise, ms, () => { throw late(); });
}
