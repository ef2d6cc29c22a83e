/**
 * `Ledger`: the append-only JSONL history of one or more sessions (docs/design.md §2, §3). The entry
 * schema and its checks live in ledger-entry.ts; this file owns the file and its one writer.
 *
 * Invariants:
 * 1. One writer. Every line reaches the file through `#writeBatch`, one batch at a time, over one
 *    handle opened in append mode, so file order is the order lines were queued: `#pump` writes
 *    in the background, and `flush` writes what is queued itself when no write or sync is in flight.
 * 2. `seq` is assigned synchronously inside `append()`, in call order, and only to an entry that
 *    passed its checks. With (1): seq order = file order, with no gaps, even for un-awaited appends.
 * 3. `#lastWrite` settles once every line queued so far has been written or has failed. It never
 *    rejects, so `flush`, `entries` and `close` can wait on it and then look at `#failure`.
 * 4. A failed write or sync breaks the ledger for good: after a write the file may end in a torn
 *    line, and writing after it would turn that into a corrupt middle line, which `open` refuses;
 *    after a sync, lines already written may never reach the disk, and no later sync can say
 *    which. So every later append and flush rejects with `#failure` (the first failure); the next
 *    `Ledger.open` repairs the tail.
 * 5. `open` changes a file in two ways only: it truncates a torn last line and it appends status
 *    entries. A complete entry is never rewritten or removed.
 *
 * 6. One writer per file: two `Ledger`s in one process on the same file are refused (by device and
 *    inode), and across processes the lock file of ledger-lock.ts names the holder.
 * 7. A turn id is used once: a `turn_started` of a turn the file already holds is refused.
 * 8. Every seq is a safe integer: an append that would pass `Number.MAX_SAFE_INTEGER` is refused
 *    rather than written as a line the reader would then refuse.
 *
 * Not guaranteed: the lock is advisory, and it is taken per path (two hard links to one file in two
 * processes are two locks).
 */

import { writeSync } from 'node:fs';
import { open as openFile, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { checkId, describe } from '../errors.js';
import { fdatasyncFd, isDiskFull, openError, readAll, writeAll } from './ledger-file.js';
import {
  closingEntries, parseLedger, renderEntry, renderTurnEntry, type LedgerEntry, type LedgerEntryInput, type TurnEntryBody,
} from './ledger-entry.js';
import { lockLedger, type LedgerLock } from './ledger-lock.js';
import { renderSafely } from './render.js';

export {
  TURN_STATUSES, TERMINAL_STATUSES, isTerminalStatus, LEDGER_ENTRY_TYPES, TURN_ABORTED_MARKER, abortedToolText, INTERRUPTED_TOOL_TEXT,
  type TurnStatus, type TerminalStatus, type LedgerEntryType, type LedgerEntryBase, type LedgerEntry,
  type LedgerEntryInput, type TurnStartedEntry, type ToolCallEntry, type ToolOutputEntry, type ToolAbortedEntry,
  type SayEntry, type StatusEntry, type TurnAbortedEntry,
} from './ledger-entry.js';

/** Narrows `Ledger.entries()`; both fields must match when both are given. */
export interface LedgerFilter {
  sessionId?: string;
  turnId?: string;
}

/** A queued line and the `append()` promise waiting for it. */
interface PendingLine {
  line: string;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** `dev:ino` of every ledger file open in this process, so a second writer is refused (see header). */
const openFiles = new Set<string>();

/**
 * Append-only JSONL history. One JSON entry per line, `{ seq, at, sessionId, turnId, type, ... }`;
 * the ledger assigns `seq` and `at`, the caller passes the rest.
 *
 * - `append` resolves once the line is written to the OS (`write`); `flush` resolves once
 *   everything appended before it is on disk (`fdatasync`). Appends issued while a write is in
 *   flight go out together in the next write.
 * - A failed write does not raise an unhandled rejection for an un-awaited append; it breaks the
 *   ledger, and every later `append`, `flush` and `close` rejects with it. (A bad entry is the
 *   caller's bug: its append rejects at once with a TypeError and the ledger stays usable.)
 * - `Ledger.open` repairs what a crash leaves behind: it drops a torn last line, gives every
 *   `tool_call` of an unfinished turn that has no output a `tool_aborted`, and marks every turn
 *   that has no terminal status `interrupted` (or `cancelled`, after the `turn_aborted` marker,
 *   where `cancelling` was recorded).
 *
 * @example
 * const ledger = await Ledger.open('/var/lib/agent/history.jsonl');
 * await ledger.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' });
 * await ledger.append({ sessionId: 's1', turnId: 't1', type: 'status', status: 'completed' });
 * await ledger.flush();
 * const history = await ledger.entries({ sessionId: 's1' });
 * await ledger.close();
 */
export class Ledger {
  /** The file, as given to `open`. */
  readonly path: string;
  readonly #handle: FileHandle;
  readonly #fileKey: string;
  readonly #lock: LedgerLock;
  /** Every turn id in the file (invariant 7). */
  readonly #turnIds: Set<string>;
  /** The last seq assigned (0 for an empty file). */
  #seq: number;
  /** Lines waiting for the next write; taken whole by `#pump`. */
  #queue: PendingLine[] = [];
  /** True while `#pump` runs; a new line then only joins `#queue`. */
  #pumping = false;
  /** True while an asynchronous write of `#pump` is in flight: nothing else may write meanwhile. */
  #writing = false;
  /**
   * The `fdatasync`s in flight: `#writeQueuedNow` writes nothing while one is, and `close()` waits
   * for them before it closes their fd.
   */
  readonly #syncs = new Set<Promise<void>>();
  /** Settles when every line queued so far is written or failed; never rejects (invariant 3). */
  #lastWrite: Promise<void> = Promise.resolve();
  /** The first write failure; `undefined` while every write has succeeded (invariant 4). */
  #failure: Error | undefined;
  /** `close()`'s promise; `undefined` while the ledger is open. */
  #closing: Promise<void> | undefined;
  /** Set as the handle closes, so a flush that raced `close()` waits for it instead of syncing a closed fd. */
  #handleClosed = false;

  private constructor(path: string, handle: FileHandle, fileKey: string, lock: LedgerLock, entries: readonly LedgerEntry[]) {
    this.path = path;
    this.#handle = handle;
    this.#fileKey = fileKey;
    this.#lock = lock;
    this.#seq = entries.at(-1)?.seq ?? 0;
    this.#turnIds = new Set(entries.map((e) => e.turnId));
  }

  /**
   * Opens (or creates) the ledger at `path` and takes its lock file `<path>.lock` (so the directory
   * must exist and be writable). Repairs a crash's leftovers (see the class), then flushes the
   * repair before resolving.
   *
   * Rejects with a TypeError for an empty or non-string path, and with an Error naming the path
   * and the cause when the file cannot be opened for appending, is not a regular file, is already
   * open in this process or in another live process (the error names it), has a bad line before
   * its last one, or cannot be repaired; on a full disk the error says so, how much is free, and
   * what to free.
   */
  static async open(path: string): Promise<Ledger> {
    checkId('Ledger.open: path', path);
    let handle: FileHandle;
    try {
      // 'a+': appends always land at the end, and the same handle can read the file back for repair.
      handle = await openFile(path, 'a+');
    } catch (cause) {
      throw await openError(path, `cannot open "${path}" for appending`, cause);
    }
    let fileKey: string | undefined;
    let lock: LedgerLock | undefined;
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new Error(`Ledger.open: "${path}" is not a regular file`);
      fileKey = `${stat.dev}:${stat.ino}`;
      if (openFiles.has(fileKey)) {
        fileKey = undefined;
        throw new Error(`Ledger.open: "${path}" is already open in this process; share that Ledger (two writers would break seq order)`);
      }
      openFiles.add(fileKey);
      try {
        lock = await lockLedger(path);
      } catch (cause) {
        if ((cause as NodeJS.ErrnoException).code === undefined) throw cause;
        throw await openError(path, `cannot write the lock file of "${path}"`, cause);
      }
      const parsed = parseLedger('Ledger.open', path, await readAll(handle, stat.size));
      if (parsed.torn) await handle.truncate(parsed.completeBytes);
      const ledger = new Ledger(path, handle, fileKey, lock, parsed.entries);
      const repairs = closingEntries(parsed.entries);
      for (const entry of repairs) void ledger.append(entry);
      // fdatasync covers the truncation too: the new size is metadata needed to read the data.
      if (parsed.torn || repairs.length > 0) {
        try {
          await ledger.flush();
        } catch (cause) {
          throw await openError(path, `cannot write to "${path}" the repair of the turns a crash left open (${repairs.length} entries)`, cause);
        }
      }
      return ledger;
    } catch (error) {
      if (fileKey !== undefined) openFiles.delete(fileKey);
      await lock?.release();
      await handle.close().catch(() => {});
      throw error;
    }
  }

  /** True when the file holds an entry of `turnId` (a turn id is used once: invariant 7). */
  hasTurn(turnId: string): boolean {
    checkId('Ledger.hasTurn: turnId', turnId);
    return this.#turnIds.has(turnId);
  }

  /**
   * Appends one entry; resolves once its line is written to the OS (not yet fsynced: see `flush`).
   * The entry is checked and serialised at the call, so mutating it afterwards changes nothing.
   *
   * Rejects with a TypeError naming the field (and writes nothing, using no seq) for a missing or
   * empty `sessionId`/`turnId`, an unknown `type`, a bad type-specific field, a supplied `seq` or
   * `at` (the ledger assigns them), or a value JSON cannot encode. Rejects with an Error once the
   * ledger is closed or a write has failed.
   */
  append(entry: LedgerEntryInput): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    let rendered: { line: string; turnId: string; type: string };
    try {
      rendered = renderEntry(entry, this.#seq + 1, Date.now());
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue(rendered.line, rendered.turnId, rendered.type);
  }

  /**
   * @internal `append` for a runner's turn: `idsJson` from `turnIdsJson(sessionId, turnId)`, made
   * once a turn, and a body the runner built (`renderTurnEntry` says what it must be). The same
   * line, the same checks of the type's fields and the same refusals as `append`.
   */
  appendForTurn(turnId: string, idsJson: string, body: TurnEntryBody): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    let line: string;
    try {
      line = renderTurnEntry(idsJson, body, this.#seq + 1, Date.now());
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue(line, turnId, body.type);
  }

  /** Why no entry can be appended now (a rejected promise), or `undefined`. */
  #refusal(): Promise<never> | undefined {
    if (this.#closing !== undefined) {
      return Promise.reject(new Error(`Ledger.append: the ledger "${this.path}" is closed`));
    }
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#seq + 1 > Number.MAX_SAFE_INTEGER) {
      return Promise.reject(new RangeError(`Ledger.append: "${this.path}" has reached seq ${this.#seq} (Number.MAX_SAFE_INTEGER); ` +
        'no later seq can be read back exactly, so start a new ledger file'));
    }
    return undefined;
  }

  /** Queue a checked, rendered line under the next seq (invariants 1 and 2). */
  #enqueue(line: string, turnId: string, type: string): Promise<void> {
    if (type === 'turn_started' && this.#turnIds.has(turnId)) {
      return Promise.reject(new Error(`Ledger.append: turn ${JSON.stringify(turnId)} is already in "${this.path}"; ` +
        'a turn id is used once (a second turn under it could never be told apart from the first)'));
    }
    this.#turnIds.add(turnId);
    this.#seq += 1;
    const written = new Promise<void>((resolve, reject) => this.#queue.push({ line, resolve, reject }));
    this.#lastWrite = written.then(noop, noop);
    if (!this.#pumping) void this.#pump();
    return written;
  }

  /**
   * Resolves once every entry appended before the call is on disk (`fdatasync`). After `close()`
   * it waits for the close, which flushed everything. Rejects if a write or the sync failed.
   */
  async flush(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    // Everything appended so far written by this very call: the sync starts in the same
    // synchronous run, not behind whatever else the microtask queue holds by the time a wait for
    // `#lastWrite` would resume (a stop's own listeners, say).
    if (!this.#writeQueuedNow()) await this.#lastWrite;
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#handleClosed) return this.#closing;
    await this.#fdatasync();
  }

  /**
   * A failed sync breaks the ledger as a failed write does (invariant 4): the kernel reports a
   * writeback error once, so a later sync could succeed although lines before it never reached
   * the disk, and a flush that then resolved would promise what is not there.
   */
  #fdatasync(): Promise<void> {
    const sync: Promise<void> = fdatasyncFd(this.#handle.fd).then(() => { this.#syncs.delete(sync); }, (cause: unknown) => {
      this.#syncs.delete(sync);
      throw this.#breakOn(`syncing "${this.path}" failed, so what was written since the last good sync may not be on disk`, cause);
    });
    this.#syncs.add(sync);
    return sync;
  }

  /** Breaks the ledger for good (invariant 4) and returns the failure: the first one, if it already was. */
  #breakOn(what: string, cause: unknown): Error {
    if (this.#failure !== undefined) return this.#failure;
    const then = isDiskFull(cause)
      ? `the disk is full (${(cause as NodeJS.ErrnoException).code}): free space on the file system holding "${dirname(this.path)}", then`
      : 'it refuses further appends, and';
    this.#failure = new Error(`Ledger: ${what} (${renderSafely(cause)}); ${then} the next Ledger.open repairs the file`, { cause });
    return this.#failure;
  }

  /**
   * A flush about to sync writes the queued lines itself, synchronously, instead of waiting for
   * the pump's asynchronous write: a small append is a copy into the page cache, far cheaper than
   * the trip through libuv's thread pool that the durable steps of a stop would otherwise pay
   * twice. Only when nothing is in flight: an asynchronous write would be overtaken (invariant 1),
   * and on a file system with stable pages a write into a page an `fdatasync` is writing back
   * waits for that I/O, which must not happen on the main thread. True when it wrote every line
   * appended so far (nothing was in flight, and the write succeeded).
   */
  #writeQueuedNow(): boolean {
    if (this.#writing || this.#syncs.size > 0 || this.#queue.length === 0 || this.#failure !== undefined) return false;
    const batch = this.#queue;
    this.#queue = [];
    this.#writeBatch(batch, () => {
      const buffer = joinLines(batch);
      for (let offset = 0; offset < buffer.length;) offset += writeSync(this.#handle.fd, buffer, offset, buffer.length - offset, null);
    });
    return this.#failure === undefined;
  }

  /**
   * The entries on disk, in seq order, optionally only those of one session and/or turn. Waits for
   * pending appends first, so it includes every append made before the call, awaited or not.
   * Reads the file each time (it is the record, not a cache), through the handle `open` made, so
   * it reads the file this ledger writes even if the path now names another file. After `close()`
   * it reads the path, and rejects if that is no longer the same file.
   *
   * Throws a TypeError when a filter value is not a non-empty string.
   */
  async entries(filter?: LedgerFilter): Promise<LedgerEntry[]> {
    const { sessionId, turnId } = checkFilter(filter);
    await this.#lastWrite;
    // A torn tail can only follow a failed write (invariant 4); it is not an entry, so it is skipped.
    const { entries } = parseLedger('Ledger.entries', this.path, await this.#readBack());
    return entries.filter((e) => (sessionId === undefined || e.sessionId === sessionId) &&
      (turnId === undefined || e.turnId === turnId));
  }

  /**
   * Waits for pending appends, flushes, and closes the file. Later appends reject; calling `close`
   * again returns the same promise. Rejects (after closing the file) if a write or the sync failed.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** `close()`, for `await using ledger = await Ledger.open(path)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    try {
      await this.#lastWrite;
      if (this.#failure !== undefined) throw this.#failure;
      await this.#fdatasync();
    } finally {
      // A flush's sync started before the close holds the fd: closing it first could sync another file.
      await Promise.allSettled([...this.#syncs]);
      this.#handleClosed = true;
      openFiles.delete(this.#fileKey);
      await this.#handle.close();
      await this.#lock.release();
    }
  }

  /** The bytes of the file this ledger opened (see `entries`). */
  async #readBack(): Promise<Buffer> {
    if (!this.#handleClosed) return readAll(this.#handle, (await this.#handle.stat()).size);
    const handle = await openFile(this.path, 'r');
    try {
      const stat = await handle.stat();
      if (`${stat.dev}:${stat.ino}` !== this.#fileKey) {
        throw new Error(`Ledger.entries: "${this.path}" is no longer the file this ledger wrote (it was moved or replaced)`);
      }
      return await readAll(handle, stat.size);
    } finally {
      await handle.close();
    }
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
    if (this.#failure !== undefined) {
      for (const pending of batch) pending.reject(this.#failure);
      return;
    }
    const fail = (cause: unknown) => {
      const failure = this.#breakOn(`writing to "${this.path}" failed`, cause);
      for (const pending of batch) pending.reject(failure);
    };
    const done = () => { for (const pending of batch) pending.resolve(); };
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

function checkFilter(filter: unknown): LedgerFilter {
  if (filter === undefined) return {};
  if (filter === null || typeof filter !== 'object') {
    throw new TypeError(`Ledger.entries: filter: expected an object, got ${describe(filter)}`);
  }
  const { sessionId, turnId } = filter as Record<string, unknown>;
  if (sessionId !== undefined) checkId('Ledger.entries: filter.sessionId', sessionId);
  if (turnId !== undefined) checkId('Ledger.entries: filter.turnId', turnId);
  return { sessionId, turnId } as LedgerFilter;
}
