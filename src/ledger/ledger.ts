/**
 * `Ledger`: the append-only JSONL history of one or more sessions (docs/design.md §2, §3). The entry
 * schema and its checks live in entry.ts, the streamed reading in scan.ts and load.ts; this file
 * owns the files (the one being written and the sealed segments) and their one writer.
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
 * 5. `open` changes a file in two ways only: it cuts a torn tail (a cut-short last line, or a hole
 *    of zeros and what follows it, whose bytes it first copies to `<path>.cut-<byte>`) and it
 *    appends status entries. A complete entry is never rewritten; one is removed only with its
 *    sealed segment, by `removeSegments` (retention: the caller's decision).
 *
 * 6. One writer per file: two `Ledger`s in one process on the same file are refused (by device and
 *    inode), and across processes and hosts the lock file of lock.ts names the holder, who keeps
 *    it fresh; a ledger whose lock was taken over writes no more. The lock is taken on the real
 *    file (symlinks resolved), so a path through a symlink meets the same lock.
 * 7. A turn id is used once: a `turn_started` of a turn the files hold is refused. Once the
 *    segments holding an ended turn are removed, its id is forgotten (turn-ids.ts), as it would
 *    be by the next open.
 * 8. Every seq is a safe integer: an append that would pass `Number.MAX_SAFE_INTEGER` is refused
 *    rather than written as a line the reader would then refuse.
 *
 * 9. The session index (session-index.ts) holds the byte range of every line, added as the line is
 *    queued: lines are written in queue order at the end of the file, so its offsets are exact
 *    while no write has failed (after one, `entries` reads the whole file instead). Offsets run
 *    across segments (segments.ts): the sealing of a segment is decided as a line is queued, so
 *    the next line's offset is known then.
 * 10. A read sees the files standing still, and never holds an append: a read waits for a sealing
 *    or a removal under way; a sealing never waits for a read (the read keeps the handle of the
 *    file it began with, renamed under it), a removal does (files.ts, rules 1-3).
 * 11. Nothing after the end: an append for a turn whose terminal status is written is refused.
 *
 * Not guaranteed: the lock is advisory, and two hard links to one file (two real paths) in two
 * processes are two locks.
 */

import { open as openFile, realpath, stat as statPath, type FileHandle } from 'node:fs/promises';
import {
  DEFAULT_LEDGER_CLOSE_WAIT_MS, DEFAULT_LEDGER_INTENT_TIMEOUT_MS, DEFAULT_LEDGER_LOCK_STALE_MS, DEFAULT_LEDGER_TIMEOUT_MS, LEDGER_MAX_LINE_BYTES,
} from '../constants.js';
import { checkId, checkText, LedgerClosedError, TurnEndedError, TurnIdUsedError } from '../errors.js';
import { checkFilter, checkOpenOptions, checkSeq, type LedgerOpenOptions } from './checks.js';
import { utf8Bytes } from '../base/head-tail.js';
import { openError, saveCut } from './file.js';
import { LedgerFiles } from './files.js';
import {
  isTerminalStatus, renderEntry, renderTurnEntry, type LedgerEntry, type LedgerEntryInput, type TurnEntryBody,
} from './entry.js';
import { loadLedger } from './load.js';
import { lockLedger, type LedgerLock } from './lock.js';
import { sealedPath, type LedgerSegment, type PlacedSegment } from './segments.js';
import { readSession, type SessionIndex } from './session-index.js';
import { LedgerWriter, type Rotate } from './writer.js';
import { StopsUnderWay } from './stops-under-way.js';
import { setLedgerHooks } from './ledger-hooks.js';
import type { TurnIds } from './turn-ids.js';
import type { LedgerFilter, LedgerStore } from './store.js';

export {
  TURN_STATUSES, TERMINAL_STATUSES, isTerminalStatus, LEDGER_ENTRY_TYPES, TURN_ABORTED_MARKER, abortedToolText, INTERRUPTED_TOOL_TEXT,
  type TurnStatus, type TerminalStatus, type LedgerEntryType, type LedgerEntryBase, type LedgerEntry,
  type LedgerEntryInput, type TurnStartedEntry, type ToolCallEntry, type ToolOutputEntry, type ToolAbortedEntry,
  type SayEntry, type StatusEntry, type TurnAbortedEntry,
} from './entry.js';

export type { LedgerFilter, LedgerStore } from './store.js';
export type { LedgerSegment } from './segments.js';
export type { LedgerOpenOptions } from './checks.js';


/** `dev:ino` of every ledger file open in this process, so a second writer is refused (see header). */
const openFiles = new Set<string>();

/** What `Ledger.open` repaired (`ledger.repair`). */
export interface LedgerRepair {
  /**
   * What was cut off the end of the file: a line a crash cut short, or a hole of zeros a power
   * loss left and every line after it (`hole: true`; those bytes are kept in `savedTo`).
   * Undefined when nothing was.
   */
  readonly cut?: { readonly bytes: number; readonly lines: number; readonly hole: boolean; readonly savedTo?: string };
  /** How many turns a crash had left open, now closed (`interrupted`, or `cancelled` after a recorded stop). */
  readonly closedTurns: number;
}

/**
 * Append-only JSONL history. One JSON entry per line, `{ seq, at, sessionId, turnId, type, ... }`;
 * the ledger assigns `seq` and `at`, the caller passes the rest.
 *
 * - `append` resolves once the line is written to the OS (`write`); `flush` resolves once
 *   everything appended before it is on disk (`fdatasync`). Appends issued while a write is in
 *   flight go out together in the next write; a long line is written in slices, so the event loop
 *   keeps turning meanwhile. A line is at most `LEDGER_MAX_LINE_BYTES` (128 MiB).
 * - Group commit: flushes under way at once share their syncs. At most one `fdatasync` is in flight
 *   and one pending; a flush that arrives while one runs rides the next, so a storm of concurrent
 *   stops costs syncs in proportion to how long it lasts, not two a stop, and each flush still
 *   resolves only once its own appends are on disk.
 * - `entries({ sessionId, turnId, afterSeq, limit })` reads that session's lines only (the ledger
 *   keeps the byte ranges of each session's lines, not the entries), and pages with `afterSeq`/`limit`.
 * - Segments (`Ledger.open(path, { segmentBytes })`): the file is sealed as `<path>.<firstSeq>-<lastSeq>`
 *   once it holds `segmentBytes`, and a new file at `path` goes on; `entries` reads across them;
 *   `removeSegments(throughSeq)` removes the oldest (or remove them by hand while the ledger is closed).
 * - A failed write does not raise an unhandled rejection for an un-awaited append; it breaks the
 *   ledger, and every later `append`, `flush` and `close` rejects with it. (A bad entry is the
 *   caller's bug: its append rejects at once with a TypeError and the ledger stays usable.)
 * - `Ledger.open` streams the files (it keeps a few bytes per run of a session's consecutive lines,
 *   every turn id and the open turns, never the entries: docs/ledger.md, "Memory") and repairs
 *   what a crash leaves behind: it cuts a torn last line, or a hole of zeros a power loss left
 *   and what follows it (kept aside in `<path>.cut-<byte>`, reported in `repair` and as a
 *   process warning), gives every `tool_call` of an unfinished turn that has no output a
 *   `tool_aborted`, and marks every turn that has no terminal status `interrupted` (or
 *   `cancelled`, after the `turn_aborted` marker, where `cancelling` was recorded).
 * - `close()` first waits (at most `closeWaitMs`) for the stops under way to write their history.
 * - A disk that stops answering never holds a stop: its signal waits for the intent's sync at most
 *   `intentTimeoutMs`, and `flush` and `close` reject with a `LedgerTimeoutError` after `timeoutMs`
 *   while the sync goes on.
 *
 * @example
 * const ledger = await Ledger.open('/var/lib/agent/history.jsonl', { segmentBytes: 256 * 1024 * 1024 });
 * await ledger.append({ sessionId: 's1', turnId: 't1', type: 'turn_started' });
 * await ledger.append({ sessionId: 's1', turnId: 't1', type: 'status', status: 'completed' });
 * await ledger.flush();
 * const page = await ledger.entries({ sessionId: 's1', afterSeq: 0, limit: 100 });
 * await ledger.close();
 */
export class Ledger implements LedgerStore {
  /** The file, as given to `open`. */
  readonly path: string;
  /** What `open` repaired. */
  readonly repair: LedgerRepair;
  /** How long a stop's signal waits for its intent's sync, in ms (`LedgerStore.intentTimeoutMs`). */
  readonly intentTimeoutMs: number;
  /** The bound of a flush's wait for the disk, and of `close()`'s wait for the syncs under way, in ms. */
  readonly timeoutMs: number;
  /** The files: the one being written and the sealed segments. */
  readonly #files: LedgerFiles;
  readonly #lock: LedgerLock;
  readonly #writer: LedgerWriter;
  readonly #segmentBytes: number | undefined;
  readonly #closeWaitMs: number;
  /** Every turn id the files hold (invariant 7), and which have ended (invariant 11). */
  readonly #turnIds: TurnIds;
  /** The turns whose `cancelling` is written and whose terminal status is not: their lines are urgent, and `close` waits for them. */
  readonly #stopping = new StopsUnderWay();
  /** Where each session's lines are (invariant 9). */
  readonly #index: SessionIndex;
  /** Where the file being written starts in the index's offsets, and the seq of its first line. */
  #activeBase: number;
  #activeFirstSeq: number;
  /** The last seq assigned (0 for an empty file). */
  #seq: number;
  /** The offset (index space) where the next queued line will be written. */
  #end: number;
  /** `close()`'s promise; `undefined` while the ledger is open. */
  #closing: Promise<void> | undefined;
  /** Set once `close` stopped waiting for stops: every append is refused. */
  #closed = false;
  private constructor(path: string, real: string, fileKey: string, lock: LedgerLock, loaded: Awaited<ReturnType<typeof loadLedger>>,
    handle: FileHandle, options: LedgerOpenOptions, repair: LedgerRepair) {
    this.path = path;
    this.repair = repair;
    this.#files = new LedgerFiles(path, real, fileKey, handle, loaded.segments, (oldKey, newKey) => {
      openFiles.delete(oldKey);
      openFiles.add(newKey);
    });
    this.#lock = lock;
    this.#segmentBytes = options.segmentBytes;
    this.#closeWaitMs = options.closeWaitMs ?? DEFAULT_LEDGER_CLOSE_WAIT_MS;
    this.intentTimeoutMs = options.intentTimeoutMs ?? DEFAULT_LEDGER_INTENT_TIMEOUT_MS;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_LEDGER_TIMEOUT_MS;
    this.#index = loaded.index;
    this.#turnIds = loaded.turnIds;
    this.#activeBase = loaded.activeBase;
    this.#activeFirstSeq = loaded.activeFirstSeq;
    this.#seq = loaded.seq;
    this.#end = loaded.activeBase + loaded.completeBytes;
    this.#writer = new LedgerWriter(path, handle, loaded.seq, this.timeoutMs);
    const writer = this.#writer;
    const seqOf = () => this.#seq;
    setLedgerHooks(this, {
      get durableSeq() { return writer.durableSeq; },
      get seq() { return seqOf(); },
      get syncs() { return writer.syncs; },
      appendForTurn: (sessionId, turnId, idsJson, body) => this.#appendForTurn(sessionId, turnId, idsJson, body),
    });
  }

  /**
   * Opens (or creates) the ledger at `path` and takes its lock file `<real path>.lock`, next to the
   * real file when `path` is a symlink (so that directory must exist and be writable). Reads the
   * sealed segments and the file as a stream, repairs a crash's leftovers (see the class and
   * `repair`), then flushes the repair before resolving. It never refuses a file for what a crash
   * or a power loss leaves at its end.
   *
   * Rejects with a TypeError/RangeError naming the option for a bad path or option, and with an
   * Error naming the path and the cause when the file cannot be opened for appending, is not a
   * regular file, is already open in this process or in another live process (through any
   * symlink; the error names the holder), has a bad line before its end (the error names the file,
   * the line and the byte: not JSON, not UTF-8, longer than `LEDGER_MAX_LINE_BYTES`, out of seq
   * order), misses seqs between two segments (the error names them and the files around the gap)
   * or has a segment that does not hold the seqs its name says (named), or cannot be repaired; on a full disk the error says so, how much is free, and what to free.
   */
  static async open(path: string, options: LedgerOpenOptions = {}): Promise<Ledger> {
    checkText('Ledger.open: path', path);
    checkOpenOptions(options);
    let handle: FileHandle;
    try {
      // 'a+': appends always land at the end, and the same handle can read the file back for repair.
      handle = await openFile(path, 'a+');
    } catch (cause) {
      throw await openError(path, `cannot open "${path}" for appending`, cause);
    }
    let fileKey: string | undefined;
    let lock: LedgerLock | undefined;
    let ledger: Ledger | undefined;
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
        lock = await lockLedger(real, path, {
          staleMs: options.lockStaleMs ?? DEFAULT_LEDGER_LOCK_STALE_MS,
          // Another writer may now write the file: this one writes no more (invariant 6).
          onLost: (error) => { if (ledger !== undefined) ledger.#lockLost(error); },
        });
      } catch (cause) {
        if ((cause as NodeJS.ErrnoException).code === undefined) throw cause;
        throw await openError(path, `cannot write the lock file of "${path}"`, cause);
      }
      const loaded = await loadLedger(path, real, handle, stat.size);
      const { cut, repairs } = loaded;
      let savedTo: string | undefined;
      if (cut !== undefined) {
        // A hole may hide lines that did land: they are kept aside, never deleted.
        if (cut.hole) savedTo = await saveCut(handle, cut.at, stat.size, `${real}.cut-${cut.at}`);
        await handle.truncate(loaded.completeBytes);
        process.emitWarning(`Ledger.open: cut ${cut.bytes} bytes (${cut.lines} lines) off the end of "${path}": ` +
          (cut.hole ? `a hole of zeros a power loss left and the lines after it, kept in "${savedTo}"` : 'a line a crash cut short'),
        { code: 'FULLSTOP_LEDGER_CUT' });
      }
      const turns = new Set(repairs.map((e) => e.turnId)).size;
      const repair: LedgerRepair = {
        closedTurns: turns,
        ...(cut === undefined ? {} : { cut: { bytes: cut.bytes, lines: cut.lines, hole: cut.hole, ...(savedTo === undefined ? {} : { savedTo }) } }),
      };
      ledger = new Ledger(path, real, fileKey, lock, loaded, handle, options, repair);
      const repaired = repairs.map((entry) => ledger!.#appendRepair(entry));
      // fdatasync covers the truncation too: the new size is metadata needed to read the data.
      if (cut !== undefined || repairs.length > 0) {
        try {
          // Queued together, then awaited together: a refused repair line fails the open, never silently.
          await Promise.all([...repaired, ledger.flush()]);
        } catch (cause) {
          throw await openError(path, `cannot write to "${path}" the repair of the turns a crash left open (${repairs.length} entries)`, cause);
        }
      }
      return ledger;
    } catch (error) {
      if (fileKey !== undefined) openFiles.delete(fileKey);
      // A repair longer than segmentBytes may have sealed a segment: the file being written is then another.
      if (ledger !== undefined && ledger.#writer.handle !== handle) {
        openFiles.delete(ledger.#files.fileKey);
        await ledger.#writer.handle.close().catch(() => {});
      }
      await lock?.release();
      await handle.close().catch(() => {});
      throw error;
    }
  }

  /** The lock was taken over (lock.ts, rule 5): every later append and flush rejects, and a warning says why. */
  #lockLost(error: Error): void {
    const failure = this.#writer.breakOn(`lost the lock of "${this.path}"`, error);
    process.emitWarning(failure.message, { code: 'FULLSTOP_LEDGER_LOCK_LOST' });
  }

  /** `"<path>"`, for messages (`LedgerStore.description`). */
  get description(): string { return `"${this.path}"`; }

  /** True when the file holds an entry of `turnId` (a turn id is used once: invariant 7). */
  hasTurn(turnId: string): boolean {
    checkId('Ledger.hasTurn: turnId', turnId);
    return this.#turnIds.has(turnId);
  }

  /**
   * The sealed segments, oldest first (the file at `path` being written is not one). Empty unless
   * the ledger was opened with `segmentBytes` (or found segments at open).
   */
  segments(): LedgerSegment[] {
    return this.#files.segments.map(({ path, firstSeq, lastSeq, bytes }) => ({ path, firstSeq, lastSeq, bytes }));
  }

  /**
   * Removes every sealed segment whose entries all have `seq <= throughSeq` (retention: call it
   * with the last seq you no longer need, e.g. from a nightly job). Their entries leave `entries`,
   * and the ids of the turns that ended in them are forgotten (`hasTurn` false, and a `turn_started`
   * under one is taken again), as the next `Ledger.open` would not know them either; a turn not
   * ended keeps its id. Resolves with the segments removed. RangeError/TypeError for a bad
   * `throughSeq`; rejects once the ledger is closed, and with the cause when a segment cannot be
   * removed (those older than it are, it and the newer stay listed).
   */
  async removeSegments(throughSeq: number): Promise<LedgerSegment[]> {
    checkSeq('Ledger.removeSegments: throughSeq', throughSeq);
    if (this.#closing !== undefined) throw new LedgerClosedError(`Ledger.removeSegments: the ledger "${this.path}" is closed`);
    return this.#files.remove(throughSeq, (firstKeptBase, removedThroughSeq) => {
      this.#index.prune(firstKeptBase ?? this.#files.currentBase(this.#activeBase));
      this.#turnIds.forgetEnded(removedThroughSeq);
    });
  }

  /**
   * Appends one entry; resolves once its line is written to the OS (not yet fsynced: see `flush`).
   * The entry is checked and serialised at the call, so mutating it afterwards changes nothing.
   *
   * Rejects with a TypeError naming the field (and writes nothing, using no seq) for a missing or
   * empty `sessionId`/`turnId`, an unknown `type`, a bad type-specific field, a supplied `seq` or
   * `at` (the ledger assigns them), or a value JSON cannot encode; with a RangeError for a line
   * longer than `LEDGER_MAX_LINE_BYTES`. Rejects with an Error once the ledger is closed (while
   * `close` waits for the stops under way, only their turns' appends are taken) or a write has failed.
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

  /** `LedgerHooks.appendForTurn` (ledger-hooks.ts): `append` for a runner's turn, its ids encoded once. */
  #appendForTurn(sessionId: string, turnId: string, idsJson: string, body: TurnEntryBody): Promise<void> {
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

  /**
   * A repair entry of `open`: built by `closingEntries` from the file's own ids, which may be longer
   * than `checkId` allows today (written before ids were bounded), so they are not checked again.
   */
  #appendRepair(entry: LedgerEntryInput): Promise<void> {
    const line = `{"seq":${this.#seq + 1},"at":${Date.now()},${JSON.stringify(entry).slice(1)}\n`;
    return this.#enqueue(line, entry.sessionId, entry.turnId, entry.type, entry.type === 'status' ? entry.status : undefined);
  }

  /** Why no entry can be appended now (a rejected promise), or `undefined`. */
  #refusal(): Promise<never> | undefined {
    if (this.#closed) return Promise.reject(this.#closedError());
    if (this.#writer.failure !== undefined) return Promise.reject(this.#writer.failure);
    if (this.#seq + 1 > Number.MAX_SAFE_INTEGER) {
      return Promise.reject(new RangeError(`Ledger.append: "${this.path}" has reached seq ${this.#seq} (Number.MAX_SAFE_INTEGER); ` +
        'no later seq can be read back exactly, so start a new ledger file'));
    }
    return undefined;
  }

  #closedError(): Error {
    return new LedgerClosedError(`Ledger.append: the ledger "${this.path}" is closed`);
  }

  /** Queue a checked, rendered line under the next seq (invariants 1, 2 and 9); `status`: a status entry's. */
  #enqueue(line: string, sessionId: string, turnId: string, type: string, status: unknown): Promise<void> {
    // While `close` waits for the stops under way, only their lines are taken.
    if (this.#closing !== undefined && !this.#stopping.has(turnId)) return Promise.reject(this.#closedError());
    if (type === 'turn_started' && this.#turnIds.has(turnId)) {
      return Promise.reject(new TurnIdUsedError(`Ledger.append: turn ${JSON.stringify(turnId)} is already in "${this.path}"; ` +
        'a turn id is used once (a second turn under it could never be told apart from the first)', turnId));
    }
    if (this.#turnIds.ended(turnId)) {
      return Promise.reject(new TurnEndedError(`Ledger.append: turn ${JSON.stringify(turnId)} has ended in "${this.path}" (its terminal status is ` +
        'recorded); nothing of a turn is appended after its end', turnId));
    }
    const bytes = utf8Bytes(line);
    if (bytes > LEDGER_MAX_LINE_BYTES) {
      return Promise.reject(new RangeError(`Ledger.append: the entry's line is ${bytes} bytes, over the ${LEDGER_MAX_LINE_BYTES} ` +
        'a ledger line may hold (LEDGER_MAX_LINE_BYTES); record a large output as a file and its path'));
    }
    this.#seq += 1;
    this.#turnIds.note(turnId, this.#seq, isTerminalStatus(status));
    const rotate = this.#segmentBytes !== undefined && this.#end - this.#activeBase >= this.#segmentBytes ? this.#sealAt(this.#seq) : undefined;
    const start = this.#end;
    this.#end += bytes;
    this.#index.add(sessionId, start, this.#end, this.#seq);
    // From its `cancelling` to its terminal status, a turn's lines are a stop's: they skip the queue of
    // other sessions' released appends (writer.ts).
    const before = this.#stopping.has(turnId);
    this.#stopping.note(turnId, status);
    const urgent = before || status === 'cancelling';
    return this.#writer.enqueue(line, this.#seq, turnId, urgent, rotate);
  }

  /**
   * The file being written is sealed before the line of `seq`: its segment is placed now (the
   * index's offsets of the next lines depend on it), renamed when the writer gets there.
   */
  #sealAt(seq: number): Rotate {
    const segment: PlacedSegment = {
      path: sealedPath(this.#files.real, this.#activeFirstSeq, seq - 1), firstSeq: this.#activeFirstSeq, lastSeq: seq - 1,
      bytes: this.#end - this.#activeBase, base: this.#activeBase,
    };
    this.#activeBase = this.#end + 1;
    this.#end = this.#activeBase;
    this.#activeFirstSeq = seq;
    return this.#files.seal(segment);
  }

  /**
   * Resolves once every entry appended before the call is on disk (`fdatasync`), sharing the sync
   * with the other flushes under way (see the class). After `close()` it waits for the close,
   * which flushed everything. Rejects if a write or the sync failed, and with a
   * `LedgerTimeoutError` when the disk has not confirmed within `timeoutMs` (the sync goes on).
   */
  flush(): Promise<void> {
    if (this.#closed) return this.#closing!;
    return this.#writer.flush();
  }

  /**
   * The entries on disk, in seq order, across the segments, optionally only those of one session
   * and/or turn, only those after `afterSeq`, at most `limit` of them (a page: pass the last `seq`
   * of the previous page as `afterSeq`). Includes every append made before the call, awaited or not.
   * Reads the files each time (they are the record, not a cache); with `sessionId` it reads that
   * session's lines only (an unknown session reads nothing). After `close()` it reads the files at
   * their paths, and rejects if the path no longer names the file this ledger wrote.
   *
   * Throws a TypeError when a filter value has the wrong type, a RangeError when `afterSeq` is not
   * a non-negative integer or `limit` not a positive one; each names the field.
   */
  async entries(filter?: LedgerFilter): Promise<LedgerEntry[]> {
    const { sessionId, turnId, afterSeq = 0, limit = Infinity } = checkFilter(filter);
    const ranges = sessionId === undefined ? undefined : this.#index.snapshot(sessionId);
    await this.#writer.lastWrite;
    return this.#files.reading(async (handle) => {
      const out: LedgerEntry[] = [];
      const visit = (e: LedgerEntry): boolean => {
        if (e.seq > afterSeq && (turnId === undefined || e.turnId === turnId) && (sessionId === undefined || e.sessionId === sessionId)) out.push(e);
        return out.length < limit;
      };
      if (sessionId !== undefined && handle !== undefined && this.#writer.failure === undefined) {
        if (ranges === undefined) return [];
        const currentBase = this.#files.currentBase(this.#activeBase);
        const from = Math.max(this.#files.segments.find((s) => s.lastSeq > afterSeq)?.base ?? currentBase, this.#index.offsetAfter(afterSeq));
        await readSession(this.#files.reader(handle, currentBase, from), 'Ledger.entries', this.path, sessionId, ranges, visit);
        return out;
      }
      // Every file (a torn tail can only follow a failed write, invariant 4: it is skipped).
      await this.#files.scan(afterSeq, handle, visit);
      return out;
    });
  }

  /**
   * Waits (at most `closeWaitMs`) for the stops under way — turns whose `cancelling` is written and
   * whose terminal status is not — to write their history (only their appends are taken
   * meanwhile), then waits for pending appends, flushes, and closes the file. Later appends
   * reject; calling `close` again returns the same promise. Rejects (after closing the file) if a
   * write or the sync failed, and with a `LedgerTimeoutError` when the disk did not confirm the
   * sync within `timeoutMs` (the lock is released all the same; the file is closed once that sync
   * returns).
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
      await this.#waitForStops();
      this.#closed = true;
      await this.#writer.lastWrite;
      await this.#writer.flush();
    } finally {
      this.#closed = true;
      // A flush's sync started before the close holds the fd: closing it first could sync another
      // file. A sync the disk never answers keeps it open, and the close goes on: the fd is closed
      // when that sync returns (nothing more is written through it).
      const handle = this.#writer.handle;
      const drained = await this.#writer.drain(this.timeoutMs);
      this.#files.closed();
      openFiles.delete(this.#files.fileKey);
      if (drained) await handle.close();
      else void this.#writer.drain().then(() => handle.close()).catch(() => {});
      await this.#lock.release();
    }
  }

  /** Resolves when no stop is under way, or after `closeWaitMs`. */
  async #waitForStops(): Promise<void> {
    // After a failed write nothing more reaches the file: no stop can finish its history.
    if (this.#writer.failure !== undefined) return;
    await this.#stopping.settled(this.#closeWaitMs);
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
