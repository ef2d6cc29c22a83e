/**
 * `Ledger`: the append-only JSONL history of one or more sessions (docs/design.md §2, §3). The entry
 * schema and its checks live in entry.ts; this file owns the file and its one writer.
 *
 * Invariants:
 * 1. One writer. Every line reaches the file through the `LedgerWriter` (writer.ts), one
 *    batch at a time, over one handle opened in append mode, so file order is the order lines were
 *    queued; its syncs are shared by every flush under way (group commit).
 * 2. `seq` is assigned synchronously inside `append()`, in call order, and only to an entry that
 *    passed its checks. With (1): seq order = file order, with no gaps, even for un-awaited appends.
 * 3. The writer's `lastWrite` settles once every line queued so far has been written or has failed.
 *    It never rejects, so `entries` and `close` can wait on it and then look at its `failure`.
 * 4. A failed write or sync breaks the ledger for good: after a write the file may end in a torn
 *    line, and writing after it would turn that into a corrupt middle line, which `open` refuses;
 *    after a sync, lines already written may never reach the disk, and no later sync can say
 *    which. So every later append and flush rejects with the first failure; the next
 *    `Ledger.open` repairs the tail.
 * 5. `open` changes a file in two ways only: it truncates a torn last line and it appends status
 *    entries. A complete entry is never rewritten or removed.
 *
 * 6. One writer per file: two `Ledger`s in one process on the same file are refused (by device and
 *    inode), and across processes the lock file of lock.ts names the holder. The lock is
 *    taken on the real file (symlinks resolved), so a path through a symlink meets the same lock.
 * 7. A turn id is used once: a `turn_started` of a turn the file already holds is refused.
 * 8. Every seq is a safe integer: an append that would pass `Number.MAX_SAFE_INTEGER` is refused
 *    rather than written as a line the reader would then refuse.
 *
 * 9. The session index (session-index.ts) holds the byte range of every line, added as the line is
 *    queued: lines are written in queue order at the end of the file, so its offsets are exact
 *    while no write has failed (after one, `entries` reads the whole file instead).
 *
 * Not guaranteed: the lock is advisory, and two hard links to one file (two real paths) in two
 * processes are two locks.
 */

import { open as openFile, realpath, stat as statPath, type FileHandle } from 'node:fs/promises';
import { checkId, checkText, describe } from '../errors.js';
import { openError, readAll } from './file.js';
import {
  closingEntries, isTerminalStatus, parseLedger, renderEntry, renderTurnEntry, type LedgerEntry, type LedgerEntryInput, type TurnEntryBody,
} from './entry.js';
import { readSession, SessionIndex } from './session-index.js';
import { lockLedger, type LedgerLock } from './lock.js';
import { LedgerWriter } from './writer.js';
import type { LedgerFilter, LedgerStore } from './store.js';

export {
  TURN_STATUSES, TERMINAL_STATUSES, isTerminalStatus, LEDGER_ENTRY_TYPES, TURN_ABORTED_MARKER, abortedToolText, INTERRUPTED_TOOL_TEXT,
  type TurnStatus, type TerminalStatus, type LedgerEntryType, type LedgerEntryBase, type LedgerEntry,
  type LedgerEntryInput, type TurnStartedEntry, type ToolCallEntry, type ToolOutputEntry, type ToolAbortedEntry,
  type SayEntry, type StatusEntry, type TurnAbortedEntry,
} from './entry.js';

export type { LedgerFilter, LedgerStore } from './store.js';


/** `dev:ino` of every ledger file open in this process, so a second writer is refused (see header). */
const openFiles = new Set<string>();


/**
 * Append-only JSONL history. One JSON entry per line, `{ seq, at, sessionId, turnId, type, ... }`;
 * the ledger assigns `seq` and `at`, the caller passes the rest.
 *
 * - `append` resolves once the line is written to the OS (`write`); `flush` resolves once
 *   everything appended before it is on disk (`fdatasync`). Appends issued while a write is in
 *   flight go out together in the next write.
 * - Group commit: flushes under way at once share their syncs. At most one `fdatasync` is in flight
 *   and one pending; a flush that arrives while one runs rides the next, so a storm of concurrent
 *   stops costs a few syncs, not two a stop, and each flush still resolves only once its own
 *   appends are on disk.
 * - `entries({ sessionId })` reads and parses that session's lines only: the ledger keeps the byte
 *   ranges of each session's lines (built at open, kept as it appends), not the entries.
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
export class Ledger implements LedgerStore {
  /** The file, as given to `open`. */
  readonly path: string;
  readonly #handle: FileHandle;
  readonly #fileKey: string;
  readonly #lock: LedgerLock;
  readonly #writer: LedgerWriter;
  /** Every turn id in the file (invariant 7). */
  readonly #turnIds: Set<string>;
  /** The turns whose `cancelling` is written and whose terminal status is not: their lines are urgent. */
  readonly #stopping = new Set<string>();
  /** Where each session's lines are (invariant 9). */
  readonly #index: SessionIndex;
  /** The last seq assigned (0 for an empty file). */
  #seq: number;
  /** The byte offset where the next queued line will be written. */
  #end: number;
  /** `close()`'s promise; `undefined` while the ledger is open. */
  #closing: Promise<void> | undefined;
  /** Set as the handle closes, so `entries` reads the path instead. */
  #handleClosed = false;

  private constructor(path: string, handle: FileHandle, fileKey: string, lock: LedgerLock, seq: number, end: number,
    turnIds: Set<string>, index: SessionIndex) {
    this.path = path;
    this.#index = index;
    this.#handle = handle;
    this.#fileKey = fileKey;
    this.#lock = lock;
    this.#seq = seq;
    this.#end = end;
    this.#turnIds = turnIds;
    this.#writer = new LedgerWriter(path, handle, seq);
  }

  /**
   * Opens (or creates) the ledger at `path` and takes its lock file `<real path>.lock`, next to the
   * real file when `path` is a symlink (so that directory must exist and be writable). Repairs a
   * crash's leftovers (see the class), then flushes the repair before resolving.
   *
   * Rejects with a TypeError for an empty or non-string path, and with an Error naming the path
   * and the cause when the file cannot be opened for appending, is not a regular file, is already
   * open in this process or in another live process (through any symlink; the error names the
   * holder), has a bad line before its last one, or cannot be repaired; on a full disk the error
   * says so, how much is free, and what to free.
   */
  static async open(path: string): Promise<Ledger> {
    checkText('Ledger.open: path', path);
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
      const real = await realFileOf(path, fileKey);
      try {
        lock = await lockLedger(real, path);
      } catch (cause) {
        if ((cause as NodeJS.ErrnoException).code === undefined) throw cause;
        throw await openError(path, `cannot write the lock file of "${path}"`, cause);
      }
      const index = new SessionIndex();
      const parsed = parseLedger('Ledger.open', path, await readAll(handle, stat.size), (e, start, end) => index.add(e.sessionId, start, end));
      if (parsed.torn) await handle.truncate(parsed.completeBytes);
      const turnIds = new Set(parsed.entries.map((e) => e.turnId));
      const ledger = new Ledger(path, handle, fileKey, lock, parsed.entries.at(-1)?.seq ?? 0, parsed.completeBytes, turnIds, index);
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

  /** `"<path>"`, for messages (`LedgerStore.description`). */
  get description(): string { return `"${this.path}"`; }

  /** True when the file holds an entry of `turnId` (a turn id is used once: invariant 7). */
  hasTurn(turnId: string): boolean {
    checkId('Ledger.hasTurn: turnId', turnId);
    return this.#turnIds.has(turnId);
  }

  /** @internal The highest seq known to be on disk (an `fdatasync` covered it); -1 before the first sync. */
  get durableSeq(): number { return this.#writer.durableSeq; }

  /** @internal The last seq assigned (0 for an empty file). */
  get seq(): number { return this.#seq; }

  /** @internal The `fdatasync`s this ledger has issued since it was opened. */
  get syncs(): number { return this.#writer.syncs; }

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
    let rendered: { line: string; sessionId: string; turnId: string; type: string; status: unknown };
    try {
      rendered = renderEntry(entry, this.#seq + 1, Date.now());
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue(rendered.line, rendered.sessionId, rendered.turnId, rendered.type, rendered.status);
  }

  /**
   * @internal `append` for a runner's turn: `idsJson` from `turnIdsJson(sessionId, turnId)`, made
   * once a turn, and a body the runner built (`renderTurnEntry` says what it must be). The same
   * line, the same checks of the type's fields and the same refusals as `append`.
   */
  appendForTurn(sessionId: string, turnId: string, idsJson: string, body: TurnEntryBody): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    let line: string;
    try {
      line = renderTurnEntry(idsJson, body, this.#seq + 1, Date.now());
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue(line, sessionId, turnId, body.type, body.type === 'status' ? body.status : undefined);
  }

  /** Why no entry can be appended now (a rejected promise), or `undefined`. */
  #refusal(): Promise<never> | undefined {
    if (this.#closing !== undefined) {
      return Promise.reject(new Error(`Ledger.append: the ledger "${this.path}" is closed`));
    }
    if (this.#writer.failure !== undefined) return Promise.reject(this.#writer.failure);
    if (this.#seq + 1 > Number.MAX_SAFE_INTEGER) {
      return Promise.reject(new RangeError(`Ledger.append: "${this.path}" has reached seq ${this.#seq} (Number.MAX_SAFE_INTEGER); ` +
        'no later seq can be read back exactly, so start a new ledger file'));
    }
    return undefined;
  }

  /** Queue a checked, rendered line under the next seq (invariants 1, 2 and 9); `status`: a status entry's. */
  #enqueue(line: string, sessionId: string, turnId: string, type: string, status: unknown): Promise<void> {
    if (type === 'turn_started' && this.#turnIds.has(turnId)) {
      return Promise.reject(new Error(`Ledger.append: turn ${JSON.stringify(turnId)} is already in "${this.path}"; ` +
        'a turn id is used once (a second turn under it could never be told apart from the first)'));
    }
    this.#turnIds.add(turnId);
    this.#seq += 1;
    const start = this.#end;
    this.#end += Buffer.byteLength(line, 'utf8');
    this.#index.add(sessionId, start, this.#end);
    // From its `cancelling` to its terminal status, a turn's lines are a stop's: they skip the queue of
    // other sessions' released appends (writer.ts).
    if (status === 'cancelling') this.#stopping.add(turnId);
    const urgent = this.#stopping.has(turnId);
    if (isTerminalStatus(status)) this.#stopping.delete(turnId);
    return this.#writer.enqueue(line, this.#seq, turnId, urgent);
  }

  /**
   * Resolves once every entry appended before the call is on disk (`fdatasync`), sharing the sync
   * with the other flushes under way (see the class). After `close()` it waits for the close,
   * which flushed everything. Rejects if a write or the sync failed.
   */
  flush(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    return this.#writer.flush();
  }

  /**
   * The entries on disk, in seq order, optionally only those of one session and/or turn. Includes
   * every append made before the call, awaited or not. Reads the file each time (it is the record,
   * not a cache), through the handle `open` made, so it reads the file this ledger writes even if
   * the path now names another file; with `sessionId` it reads that session's lines only (an
   * unknown session reads nothing). After `close()` it reads the whole file at the path, and
   * rejects if that is no longer the same file.
   *
   * Throws a TypeError when a filter value is not a non-empty string.
   */
  async entries(filter?: LedgerFilter): Promise<LedgerEntry[]> {
    const { sessionId, turnId } = checkFilter(filter);
    const byTurn = (e: LedgerEntry) => turnId === undefined || e.turnId === turnId;
    const ranges = sessionId === undefined ? undefined : this.#index.snapshot(sessionId);
    await this.#writer.lastWrite;
    if (sessionId !== undefined && !this.#handleClosed && this.#writer.failure === undefined) {
      if (ranges === undefined) return [];
      return (await readSession(this.#handle, 'Ledger.entries', this.path, sessionId, ranges)).filter(byTurn);
    }
    // A torn tail can only follow a failed write (invariant 4); it is not an entry, so it is skipped.
    const { entries } = parseLedger('Ledger.entries', this.path, await this.#readBack());
    return entries.filter((e) => (sessionId === undefined || e.sessionId === sessionId) && byTurn(e));
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
      await this.#writer.lastWrite;
      await this.#writer.flush();
    } finally {
      // A flush's sync started before the close holds the fd: closing it first could sync another file.
      await this.#writer.drain();
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
}

/**
 * The real path of the file open as `fileKey` (`dev:ino`) under `path`: the lock is taken there, so
 * every symlink to one file meets one lock. Rejects if the path no longer names that file.
 */
async function realFileOf(path: string, fileKey: string): Promise<string> {
  const real = await realpath(path);
  const stat = await statPath(real);
  if (`${stat.dev}:${stat.ino}` !== fileKey) {
    throw new Error(`Ledger.open: "${path}" was replaced while it was being opened; open it again`);
  }
  return real;
}

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
