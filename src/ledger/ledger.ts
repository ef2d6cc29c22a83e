/**
 * `Ledger`: the append-only JSONL history of one or more sessions (docs/design.md §2, §3). The entry
 * schema and its checks live in entry.ts, the streamed reading in scan.ts and load.ts, the opening
 * of the file in opening.ts, where each line goes in placement.ts and why an append is refused in
 * append-refusals.ts; this file ties the files (files.ts) to their one writer.
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
 * 5. `open` changes a file in two ways only: it cuts a torn tail and it appends status entries; a
 *    complete entry is never rewritten (opening.ts).
 *
 * 6. One writer per file, in this process and across processes and hosts (claim.ts); a ledger
 *    whose lock was taken over writes no more.
 * 7. A turn id is used once: a `turn_started` of a turn the files hold is refused. Once the
 *    segments holding an ended turn are removed, its id is forgotten (turn-ids.ts), as it would
 *    be by the next open.
 * 8. Every seq is a safe integer: an append that would pass `Number.MAX_SAFE_INTEGER` is refused
 *    rather than written as a line the reader would then refuse.
 *
 * 9. The session index (session-index.ts) holds the byte range of every line, placed as the line
 *    is queued (placement.ts), exact while no write has failed (after one, `entries` reads the
 *    whole file instead).
 * 10. A read sees the files standing still, and never holds an append: a read waits for a sealing
 *    or a removal under way; a sealing never waits for a read (the read keeps the handle of the
 *    file it began with, renamed under it), a removal does (files.ts, rules 1-3).
 * 11. Nothing after the end: an append for a turn whose terminal status is written is refused.
 */

import {
  DEFAULT_LEDGER_CLOSE_WAIT_MS, DEFAULT_LEDGER_INTENT_TIMEOUT_MS, DEFAULT_LEDGER_LOCK_STALE_MS, DEFAULT_LEDGER_TIMEOUT_MS,
} from '../constants.js';
import { checkId, checkText, LedgerClosedError } from '../errors.js';
import { closedError, ledgerRefusal, lineRefusal } from './append-refusals.js';
import { checkFilter, checkOpenOptions, checkSeq, type LedgerOpenOptions } from './checks.js';
import { utf8Bytes } from '../base/head-tail.js';
import { dropClaim, moveClaim } from './claim.js';
import { openError } from './file.js';
import { LedgerFiles } from './files.js';
import {
  isTerminalStatus, renderEntry, renderTurnEntry, turnIdsJson, type LedgerEntry, type LedgerEntryInput, type TurnEntryBody,
} from './entry.js';
import type { LedgerLock } from './lock.js';
import { abandonFile, openLedgerFile, type LedgerRepair, type OpenedFile } from './opening.js';
import { LinePlacement } from './placement.js';
import type { LedgerSegment } from './segments.js';
import type { SessionIndex } from './session-index.js';
import { LedgerWriter } from './writer.js';
import { StopsUnderWay } from './stops-under-way.js';
import { setLedgerHooks } from './ledger-hooks.js';
import { setTurnAppends } from './turn-append.js';
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
export type { LedgerRepair } from './opening.js';

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
  readonly #closeWaitMs: number;
  /** Every turn id the files hold (invariant 7), and which have ended (invariant 11). */
  readonly #turnIds: TurnIds;
  /** The turns whose `cancelling` is written and whose terminal status is not: their lines are urgent, and `close` waits for them. */
  readonly #stopping = new StopsUnderWay();
  /** Where each session's lines are (invariant 9). */
  readonly #index: SessionIndex;
  /** The seq and the offsets of the next line (invariants 2 and 9). */
  readonly #placement: LinePlacement;
  /** `close()`'s promise; `undefined` while the ledger is open. */
  #closing: Promise<void> | undefined;
  /** Set once `close` stopped waiting for stops: every append is refused. */
  #closed = false;
  private constructor(path: string, { handle, claim, loaded, repair }: OpenedFile, options: LedgerOpenOptions) {
    this.path = path;
    this.repair = repair;
    this.#files = new LedgerFiles(path, claim.real, claim.fileKey, handle, loaded.segments, moveClaim);
    this.#lock = claim.lock;
    this.#closeWaitMs = options.closeWaitMs ?? DEFAULT_LEDGER_CLOSE_WAIT_MS;
    this.intentTimeoutMs = options.intentTimeoutMs ?? DEFAULT_LEDGER_INTENT_TIMEOUT_MS;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_LEDGER_TIMEOUT_MS;
    this.#index = loaded.index;
    this.#turnIds = loaded.turnIds;
    this.#placement = new LinePlacement(this.#files, loaded.index, options.segmentBytes, loaded);
    this.#writer = new LedgerWriter(path, handle, loaded.seq, this.timeoutMs);
    const writer = this.#writer;
    const placement = this.#placement;
    setLedgerHooks(this, {
      get durableSeq() { return writer.durableSeq; },
      get seq() { return placement.seq; },
      get syncs() { return writer.syncs; },
    });
    setTurnAppends(this, (sessionId, turnId) => {
      const idsJson = turnIdsJson(sessionId, turnId);
      return (body) => this.#appendForTurn(sessionId, turnId, idsJson, body);
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
    let ledger: Ledger | undefined;
    // Another writer may now write the file: this one writes no more (invariant 6).
    const opened = await openLedgerFile(path, options.lockStaleMs ?? DEFAULT_LEDGER_LOCK_STALE_MS, (error) => {
      if (ledger !== undefined) ledger.#lockLost(error);
    });
    try {
      ledger = new Ledger(path, opened, options);
      const { cut, repairs } = opened.loaded;
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
      // A repair longer than segmentBytes may have sealed a segment: the file being written is then another.
      const sealed = ledger !== undefined && ledger.#writer.handle !== opened.handle
        ? { fileKey: ledger.#files.fileKey, handle: ledger.#writer.handle } : undefined;
      await abandonFile(opened, sealed);
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
      this.#index.prune(firstKeptBase ?? this.#placement.currentBase());
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
      rendered = renderEntry(entry, this.#placement.seq + 1, Date.now());
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue(rendered.line, rendered.sessionId, rendered.turnId, rendered.type, rendered.status);
  }

  /** `TurnAppends` (turn-append.ts): `append` for a runner's turn, its ids encoded once. */
  #appendForTurn(sessionId: string, turnId: string, idsJson: string, body: TurnEntryBody): Promise<void> {
    const refused = this.#refusal();
    if (refused !== undefined) return refused;
    let line: string;
    try {
      line = renderTurnEntry(idsJson, body, this.#placement.seq + 1, Date.now());
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
    const line = `{"seq":${this.#placement.seq + 1},"at":${Date.now()},${JSON.stringify(entry).slice(1)}\n`;
    return this.#enqueue(line, entry.sessionId, entry.turnId, entry.type, entry.type === 'status' ? entry.status : undefined);
  }

  /** Why no entry can be appended now (a rejected promise; append-refusals.ts), or `undefined`. */
  #refusal(): Promise<never> | undefined {
    const refused = ledgerRefusal(this.path, this.#closed, this.#writer.failure, this.#placement.seq);
    return refused === undefined ? undefined : Promise.reject(refused);
  }

  /** Queue a checked, rendered line under the next seq (invariants 1, 2 and 9); `status`: a status entry's. */
  #enqueue(line: string, sessionId: string, turnId: string, type: string, status: unknown): Promise<void> {
    // While `close` waits for the stops under way, only their lines are taken.
    if (this.#closing !== undefined && !this.#stopping.has(turnId)) return Promise.reject(closedError(this.path));
    const bytes = utf8Bytes(line);
    const refused = lineRefusal(this.path, this.#turnIds, turnId, type, bytes);
    if (refused !== undefined) return Promise.reject(refused);
    const rotate = this.#placement.place(sessionId, bytes);
    const seq = this.#placement.seq;
    this.#turnIds.note(turnId, seq, isTerminalStatus(status));
    // From its `cancelling` to its terminal status, a turn's lines are a stop's: they skip the queue of
    // other sessions' released appends (writer.ts).
    const before = this.#stopping.has(turnId);
    this.#stopping.note(turnId, status);
    const urgent = before || status === 'cancelling';
    return this.#writer.enqueue(line, seq, turnId, urgent, rotate);
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
    const checked = checkFilter(filter);
    const ranges = checked.sessionId === undefined ? undefined : this.#index.snapshot(checked.sessionId);
    await this.#writer.lastWrite;
    const marked = this.#index.offsetAfter(checked.afterSeq ?? 0);
    return this.#files.entries(checked, ranges, () => (this.#writer.failure === undefined ? this.#placement.currentBase() : undefined), marked);
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
      dropClaim(this.#files.fileKey);
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
