/**
 * The one writer of a ledger file (ledger.ts, invariants 1, 3 and 4): the queue of rendered lines,
 * the background pump that writes them, and group commit of the `fdatasync`s that make them durable.
 *
 * Group commit: at most one sync is in flight and at most one is pending. A flush whose lines the
 * sync in flight already covers waits for it; any other joins the pending sync, which starts when
 * the one in flight ends and covers every line written by then. So N flushes under way at once cost
 * a number of syncs that grows with how long they keep coming, not with N: a storm of 1,000 stops
 * shares a handful of syncs instead of issuing 2,000.
 */

import { writeSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fdatasyncFd, isDiskFull, writeAll } from './ledger-file.js';
import { renderSafely } from './render.js';

/** A queued line, its seq and the `append()` promise waiting for it. */
interface PendingLine {
  line: string;
  seq: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** A sync in flight: the seq it covers (every line appended before it began) and its end. */
interface Sync {
  covers: number;
  done: Promise<void>;
}

/** The pending sync: the flushes that joined it wait on `done`. */
interface PendingSync {
  done: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Writes and syncs one ledger file's lines in seq order; a failure breaks it for good. */
export class LedgerWriter {
  readonly #path: string;
  readonly #handle: FileHandle;
  /** Lines waiting for the next write; taken whole by `#pump` or `#writeQueuedNow`. */
  #queue: PendingLine[] = [];
  /** True while `#pump` runs; a new line then only joins `#queue`. */
  #pumping = false;
  /** True while an asynchronous write of `#pump` is in flight: nothing else may write meanwhile. */
  #writing = false;
  /** Settles when every line queued so far is written or failed; never rejects (ledger.ts, invariant 3). */
  #lastWrite: Promise<void> = Promise.resolve();
  /** The highest seq appended (queued) so far. */
  #queuedSeq: number;
  /** The highest seq whose line the OS has (`write` returned). */
  #writtenSeq: number;
  /** The highest seq an `fdatasync` has covered; -1 until the first, as lines found at open may not be on disk yet. */
  #durableSeq = -1;
  /** The sync in flight, if any. */
  #syncing: Sync | undefined;
  /** The sync that starts when `#syncing` ends, if a flush joined it. */
  #pending: PendingSync | undefined;
  /** `fdatasync`s issued, for the ledger's statistics. */
  #syncs = 0;
  /** The first write or sync failure; `undefined` while every one has succeeded (ledger.ts, invariant 4). */
  failure: Error | undefined;

  constructor(path: string, handle: FileHandle, seq: number) {
    this.#path = path;
    this.#handle = handle;
    this.#queuedSeq = seq;
    this.#writtenSeq = seq;
  }

  /** The highest seq known to be on disk (-1 before the first sync). */
  get durableSeq(): number { return this.#durableSeq; }
  /** `fdatasync`s issued so far. */
  get syncs(): number { return this.#syncs; }
  /** Settles once every line queued so far is written or failed; never rejects. */
  get lastWrite(): Promise<void> { return this.#lastWrite; }

  /** Queue `line` under `seq` (the next one); resolves once it is written to the OS. */
  enqueue(line: string, seq: number): Promise<void> {
    this.#queuedSeq = seq;
    const written = new Promise<void>((resolve, reject) => this.#queue.push({ line, seq, resolve, reject }));
    this.#lastWrite = written.then(noop, noop);
    if (!this.#pumping) void this.#pump();
    return written;
  }

  /**
   * Resolves once every line queued before the call is on disk, sharing the sync with every other
   * flush under way (see the header). Rejects with the failure once a write or sync failed.
   */
  flush(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const target = this.#queuedSeq;
    if (this.#durableSeq >= target) return Promise.resolve();
    if (this.#syncing === undefined) return this.#startSync().done;
    if (this.#syncing.covers >= target) return this.#syncing.done;
    if (this.#pending === undefined) {
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const done = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
      this.#pending = { done, resolve, reject };
    }
    return this.#pending.done;
  }

  /** Resolves once no sync is in flight or pending (their fd must stay open until then); never rejects. */
  async drain(): Promise<void> {
    while (this.#syncing !== undefined) await this.#syncing.done.catch(noop);
  }

  /**
   * Start a sync now (none is in flight) covering every line queued so far. When it ends, the
   * pending sync (if a flush joined one meanwhile) starts, in the same synchronous run.
   */
  #startSync(): Sync {
    const sync: Sync = { covers: this.#queuedSeq, done: this.#sync() };
    this.#syncing = sync;
    const next = () => {
      if (this.#syncing === sync) this.#syncing = undefined;
      const pending = this.#pending;
      if (pending === undefined) return;
      this.#pending = undefined;
      this.#startSync().done.then(pending.resolve, pending.reject);
    };
    sync.done.then(next, next);
    return sync;
  }

  async #sync(): Promise<void> {
    // The lines queued so far written by this very call when nothing is in flight: the sync then
    // starts in the same synchronous run, not behind whatever else the microtask queue holds.
    if (!this.#writeQueuedNow()) await this.#lastWrite;
    if (this.failure !== undefined) throw this.failure;
    const covers = this.#writtenSeq;
    this.#syncs += 1;
    try {
      await fdatasyncFd(this.#handle.fd);
    } catch (cause) {
      // A failed sync breaks the ledger as a failed write does: the kernel reports a writeback error
      // once, so a later sync could succeed although lines before it never reached the disk.
      throw this.breakOn(`syncing "${this.#path}" failed, so what was written since the last good sync may not be on disk`, cause);
    }
    if (covers > this.#durableSeq) this.#durableSeq = covers;
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
   * the trip through libuv's thread pool. Only when nothing is in flight: an asynchronous write
   * would be overtaken (invariant 1), and on a file system with stable pages a write into a page an
   * `fdatasync` is writing back waits for that I/O, which must not happen on the main thread (the
   * caller starts a sync only when none is in flight). True when it wrote every line queued so far.
   */
  #writeQueuedNow(): boolean {
    if (this.#writing || this.#queue.length === 0 || this.failure !== undefined) return false;
    const batch = this.#queue;
    this.#queue = [];
    this.#writeBatch(batch, () => {
      const buffer = joinLines(batch);
      for (let offset = 0; offset < buffer.length;) offset += writeSync(this.#handle.fd, buffer, offset, buffer.length - offset, null);
    });
    return this.failure === undefined;
  }

  /** The background writer (invariant 1): writes whatever queued up meanwhile as one batch, until none is left. */
  async #pump(): Promise<void> {
    this.#pumping = true;
    // Let the lines appended in the same synchronous run join the first batch (a stop appends
    // its aborted outputs, marker and status back to back: one write instead of two).
    await undefined;
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      this.#writing = true;
      try {
        await this.#writeBatch(batch, () => writeAll(this.#handle, joinLines(batch)));
      } finally {
        this.#writing = false;
      }
    }
    this.#pumping = false;
  }

  /**
   * Write one batch with `write` and settle its appends; a failure breaks the ledger (invariant 4).
   * Returns a promise only when `write` does (the pump's asynchronous write).
   */
  #writeBatch(batch: PendingLine[], write: () => Promise<void> | void): Promise<void> | void {
    if (this.failure !== undefined) {
      for (const pending of batch) pending.reject(this.failure);
      return;
    }
    const fail = (cause: unknown) => {
      const failure = this.breakOn(`writing to "${this.#path}" failed`, cause);
      for (const pending of batch) pending.reject(failure);
    };
    const done = () => {
      this.#writtenSeq = batch.at(-1)!.seq;
      for (const pending of batch) pending.resolve();
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
}

function joinLines(batch: readonly PendingLine[]): Buffer {
  return Buffer.from(batch.map((pending) => pending.line).join(''), 'utf8');
}

function noop(): void {}
