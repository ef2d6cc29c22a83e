/**
 * Group commit: the appends of one `PgLedger` share transactions.
 *
 * Invariants:
 * 1. `MAIN_LANES` main lanes and a big one, each with at most one transaction in flight: a free main
 *    lane takes queued rows (its share of the queue among the free lanes, at least
 *    `MIN_SHARE_ROWS`; at most `MAX_BATCH_ROWS` and `MAX_BATCH_BYTES` a transaction, in append
 *    order), the big lane a row over `BIG_ROW_BYTES`, alone; so a storm of concurrent stops costs a
 *    few transactions that run side by side, and one session's huge entry never holds another
 *    session's stop behind it.
 * 2. A session's rows keep their order: a batch skips the rows of a session that has rows in
 *    flight (or a big row ahead in the queue), and a row the database found `busy` goes back to
 *    the queue in its place.
 * 3. Every row settles within `timeoutMs` of its append: a batch is sent with the time its oldest
 *    row has left, and a row still queued at its deadline is rejected and never sent.
 * 4. The queue is bounded (`MAX_QUEUED_ROWS`, `MAX_QUEUED_BYTES`, rows in flight counted): past it
 *    `add` waits, in call order, until rows settle (backpressure); a row bigger than the bound
 *    alone waits for an empty queue.
 * 5. A durable row's promise settles with its commit (or refusal, or failure). Any other row's
 *    resolves once it is queued (accepted in order), and what befalls it later is told to
 *    `late` (the ledger gives it to its turn's next append) and to the flushes waiting on it.
 * 6. A batch the server refuses as a whole for a reason a smaller one may not meet is sent again
 *    in halves (appender.ts `splittable`) while time is left: only the row that fails fails.
 * 7. A flush waits for the rows appended before it that are not settled yet (the flushes are a
 *    `FlushQueue`, group-commit-core.ts, by local seq), and rejects if one of them failed to
 *    commit, or was refused after its append resolved (a durable row's refusal — an ended turn, a
 *    used turn id — is its append's rejection, not the flush's). A flush of one turn waits for
 *    that turn's rows only (a stop's intent never waits for another session's big entry).
 */

import { LedgerTimeoutError } from '../../errors.js';
import { FlushQueue } from '../group-commit-core.js';
import { reported } from './pool.js';
import { splittable, type Appender, type Row, type Verdict } from './appender.js';
import { MAX_BATCH_ROWS } from './statements.js';

/** The most bytes of rows one transaction of the main lane carries (a bigger row goes alone). */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** A row over this many bytes goes in the big lane, alone. */
export const BIG_ROW_BYTES = 1024 * 1024;
/** The most rows queued or in flight before `append` waits. */
export const MAX_QUEUED_ROWS = 10_000;
/** The most bytes of rows queued or in flight before `append` waits. */
export const MAX_QUEUED_BYTES = 64 * 1024 * 1024;
/** How long rows the database found `busy` (their session locked elsewhere) wait before they are sent again, in ms: doubled at each busy answer, up to `BUSY_RETRY_MAX_MS`. */
const BUSY_RETRY_MS = 5;
const BUSY_RETRY_MAX_MS = 100;
/** The fewest rows a lane is given while others are free: a small queue goes out as one batch. */
const MIN_SHARE_ROWS = 64;
/** Main lanes: the transactions of one ledger in flight at once, each of other sessions' rows (invariant 1). */
export const MAIN_LANES = 3;

/** A row with its append's promise and its deadline (`performance.now()` time). */
interface Pending {
  row: Row;
  deadline: number;
  durable: boolean;
  resolve(): void;
  reject(error: unknown): void;
  /** The flushes of its turn waiting for it (`flushTurn`). */
  flushes?: TurnFlush[];
  /** How many times the database found it busy. */
  busy?: number;
}

type Fate = Verdict | { error: unknown };

/** A flush of one turn: settles once its `left` rows have; `failure` is the first a flush of the turn is told. */
interface TurnFlush {
  left: number;
  failure: unknown;
  resolve(): void;
  reject(error: unknown): void;
}

export class GroupCommit {
  readonly #appender: Appender;
  readonly #timeoutMs: number;
  readonly #where: string;
  /** The refusal of a row for its verdict (`used`, `ended`, …); `undefined` for `ok`. */
  readonly #refusal: (row: Row, verdict: Verdict) => Error | undefined;
  /** What befell a row whose append had already resolved (invariant 5). */
  readonly #late: (row: Row, error: unknown) => void;
  /** Rows waiting for a transaction, by local seq. */
  #queue: Pending[] = [];
  /** Appends waiting for room in the queue, in call order (invariant 4). */
  #waiting: Pending[] = [];
  /** The rows not settled yet (waiting, queued, in flight), by turn: what a flush of one turn waits for. */
  readonly #byTurn = new Map<string, Set<Pending>>();
  /** Rows and bytes queued or in flight. */
  #rows = 0;
  #bytes = 0;
  /** The batch in flight in each main lane and in the big one; `undefined` when none is. */
  readonly #main: (Pending[] | undefined)[] = Array.from({ length: MAIN_LANES }, () => undefined);
  #big: Pending[] | undefined;
  /** Rows in flight (main lanes and the big one), by session: a batch skips their sessions (invariant 2). */
  readonly #flying = new Map<string, number>();
  /** Flushes under way, waiting by local seq (invariant 7). */
  readonly #flushes = new FlushQueue(0);
  /** Fires at the oldest queued row's deadline, or after `BUSY_RETRY_MS` (invariants 2, 3). */
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  /** A `#pump` is queued for the end of this synchronous run. */
  #pumpQueued = false;

  constructor(appender: Appender, timeoutMs: number, where: string, refusal: (row: Row, verdict: Verdict) => Error | undefined,
    late: (row: Row, error: unknown) => void) {
    this.#appender = appender;
    this.#timeoutMs = timeoutMs;
    this.#where = where;
    this.#refusal = refusal;
    this.#late = late;
  }

  /** Queues `row`; resolves as invariant 5 says, rejects when it was refused or failed (a durable row) or expired unsent. */
  add(row: Row, durable: boolean): Promise<void> {
    this.#flushes.admit(row.localSeq);
    return new Promise<void>((resolve, reject) => {
      const pending: Pending = { row, deadline: performance.now() + this.#timeoutMs, durable, resolve, reject };
      const ofTurn = this.#byTurn.get(row.turnId);
      if (ofTurn === undefined) this.#byTurn.set(row.turnId, new Set([pending]));
      else ofTurn.add(pending);
      if (this.#waiting.length > 0 || !this.#roomFor(row)) {
        this.#waiting.push(pending);
        this.#arm(pending.deadline);
        return;
      }
      this.#admit(pending);
    });
  }

  /** Resolves once every row added so far has settled; rejects with the first that failed (invariant 7). */
  flush(): Promise<void> {
    return this.#flushes.wait(this.#lowest());
  }

  /** Resolves once every row of `turnId` added so far has settled; rejects with the first that failed (invariant 7). */
  flushTurn(turnId: string): Promise<void> {
    const rows = this.#byTurn.get(turnId);
    if (rows === undefined) return Promise.resolve();
    // One promise a flush, whatever the turn's rows (a stop flushes its turn twice).
    return new Promise<void>((resolve, reject) => {
      const flush: TurnFlush = { left: rows.size, failure: undefined, resolve, reject };
      for (const p of rows) (p.flushes ??= []).push(flush);
    });
  }

  /** Marks `pending` settled for the flushes of its turn (`failure`: what they are told; `undefined`: nothing). */
  #done(pending: Pending, failure: unknown): void {
    const ofTurn = this.#byTurn.get(pending.row.turnId);
    if (ofTurn?.delete(pending) && ofTurn.size === 0) this.#byTurn.delete(pending.row.turnId);
    for (const flush of pending.flushes ?? []) {
      if (flush.failure === undefined) flush.failure = failure;
      if (--flush.left > 0) continue;
      if (flush.failure === undefined) flush.resolve();
      else flush.reject(flush.failure);
    }
  }

  /** True while a row is queued, waiting or in flight. */
  get busy(): boolean {
    return this.#rows > 0 || this.#waiting.length > 0;
  }

  #roomFor(row: Row): boolean {
    if (this.#rows === 0) return true;
    return this.#rows + 1 <= MAX_QUEUED_ROWS && this.#bytes + row.bytes <= MAX_QUEUED_BYTES;
  }

  #admit(pending: Pending): void {
    this.#rows++;
    this.#bytes += pending.row.bytes;
    this.#queue.push(pending);
    if (!pending.durable) pending.resolve();
    // Sent at the end of this synchronous run, not at the first append of it: a stop's history
    // (its aborted outputs, the marker, `cancelled`, appended back to back) is one transaction.
    if (!this.#pumpQueued && (this.#main.includes(undefined) || this.#big === undefined)) {
      this.#pumpQueued = true;
      queueMicrotask(() => {
        this.#pumpQueued = false;
        this.#pump();
      });
    }
  }

  /** Lets waiting appends in while there is room, oldest first; rejects the ones past their deadline. */
  #admitWaiting(now: number): void {
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0]!;
      if (next.deadline <= now) {
        this.#waiting.shift();
        this.#expired([next], false);
        continue;
      }
      if (!this.#roomFor(next.row)) return;
      this.#waiting.shift();
      this.#admit(next);
    }
  }

  /** Sends what each free lane can take (invariants 1, 2). */
  #pump(): void {
    const now = performance.now();
    this.#expire(now);
    this.#admitWaiting(now);
    this.#sendWhatLanesTake();
    // Both lists are in append order, so in deadline order (a row's deadline is its append time +
    // timeoutMs; a busy row goes back in by localSeq): their heads are the oldest.
    const oldest = Math.min(this.#queue[0]?.deadline ?? Infinity, this.#waiting[0]?.deadline ?? Infinity);
    if (oldest !== Infinity) this.#arm(oldest);
  }

  #sendWhatLanesTake(): void {
    let free = this.#main.filter((batch) => batch === undefined).length;
    for (let lane = 0; lane < this.#main.length && free > 0 && this.#queue.length > 0; lane++) {
      if (this.#main[lane] !== undefined) continue;
      // A storm's rows are shared out among the free lanes, so its transactions run side by side.
      const batch = this.#takeBatch(Math.min(MAX_BATCH_ROWS, Math.max(MIN_SHARE_ROWS, Math.ceil(this.#queue.length / free))));
      if (batch === undefined) break;
      free--;
      this.#main[lane] = batch;
      this.#send(batch, () => { this.#main[lane] = undefined; });
    }
    if (this.#big === undefined) {
      const seen = new Set<string>();
      const index = this.#queue.findIndex((p) => {
        const session = p.row.sessionId;
        if (!seen.has(session) && !this.#flying.has(session) && p.row.bytes > BIG_ROW_BYTES) return true;
        seen.add(session);
        return false;
      });
      if (index >= 0) {
        const [p] = this.#queue.splice(index, 1) as [Pending];
        this.#fly([p], 1);
        this.#big = [p];
        // A macrotask later: the main lane's batch (a stop's intent) is on its way before this row's megabytes are encoded.
        setImmediate(() => this.#send([p], () => { this.#big = undefined; }));
      }
    }
  }

  /**
   * Takes a main-lane batch of at most `cap` rows off the queue in one pass, in queue order: no row
   * of a session in flight, nor of one with a big row ahead (invariant 2); `undefined` for none.
   */
  #takeBatch(cap: number): Pending[] | undefined {
    const queue = this.#queue;
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const blocked = new Set<string>();
    let bytes = 0;
    let i = 0;
    for (; i < queue.length; i++) {
      const p = queue[i]!;
      const session = p.row.sessionId;
      if (this.#flying.has(session) || blocked.has(session)) {
        rest.push(p);
        continue;
      }
      if (p.row.bytes > BIG_ROW_BYTES) {
        blocked.add(session);
        rest.push(p);
        continue;
      }
      if (batch.length >= cap || (batch.length > 0 && bytes + p.row.bytes > MAX_BATCH_BYTES)) break;
      batch.push(p);
      bytes += p.row.bytes;
    }
    if (batch.length === 0) return undefined;
    this.#queue = i < queue.length ? rest.concat(queue.slice(i)) : rest;
    this.#fly(batch, 1);
    return batch;
  }

  /** Counts `rows` in flight (`by` 1) or back (`by` -1), by session. */
  #fly(rows: readonly Pending[], by: 1 | -1): void {
    for (const p of rows) {
      const session = p.row.sessionId;
      const count = (this.#flying.get(session) ?? 0) + by;
      if (count === 0) this.#flying.delete(session);
      else this.#flying.set(session, count);
    }
  }

  #send(batch: Pending[], free: () => void): void {
    const deadline = batch[0]!.deadline; // the batch is in queue order: its first row is its oldest
    let retry = 0;
    this.#split(batch.map((p) => p.row), deadline).then((fates) => {
      const again: Pending[] = [];
      batch.forEach((pending, i) => {
        const fate = fates[i]!;
        if (fate === 'busy') {
          pending.busy = (pending.busy ?? 0) + 1;
          retry = Math.max(retry, Math.min(BUSY_RETRY_MAX_MS, BUSY_RETRY_MS * 2 ** (pending.busy - 1)));
          again.push(pending);
        } else {
          this.#settle(pending, fate);
        }
      });
      if (again.length > 0) {
        this.#queue = [...again, ...this.#queue].sort((a, b) => a.row.localSeq - b.row.localSeq);
      }
    }).finally(() => {
      this.#fly(batch, -1);
      free();
      this.#settleFlushes();
      if (retry > 0) this.#arm(performance.now() + retry);
      else this.#pump();
    });
  }

  /** One fate a row: the batch's verdicts, or its halves' when the server refused it whole (invariant 6). */
  async #split(rows: Row[], deadline: number): Promise<Fate[]> {
    try {
      return await this.#appender.send(rows, deadline - performance.now());
    } catch (error) {
      if (rows.length === 1 || !splittable(error) || deadline - performance.now() <= 0) return rows.map(() => ({ error }));
      const half = Math.ceil(rows.length / 2);
      return [...await this.#split(rows.slice(0, half), deadline), ...await this.#split(rows.slice(half), deadline)];
    }
  }

  #settle(pending: Pending, fate: Fate): void {
    this.#rows--;
    this.#bytes -= pending.row.bytes;
    const failure = typeof fate === 'string' ? this.#refusal(pending.row, fate) : reported(fate.error);
    if (failure === undefined) {
      this.#done(pending, undefined);
      if (pending.durable) pending.resolve();
      return;
    }
    // A failure to commit is every later flush's; a durable row's refusal is its append's alone (invariant 7).
    const flushes = typeof fate !== 'string' || !pending.durable;
    this.#done(pending, flushes ? failure : undefined);
    if (flushes) this.#flushes.fail(pending.row.localSeq, failure);
    if (pending.durable) pending.reject(failure);
    else this.#late(pending.row, failure);
  }

  /** Rejects the queued rows past their deadline; they were never sent (invariant 3). */
  #expire(now: number): void {
    let count = 0; // the queue is in deadline order (#pump): the expired rows are its head
    while (count < this.#queue.length && this.#queue[count]!.deadline <= now) count++;
    if (count === 0) return;
    const expired = this.#queue.splice(0, count);
    for (const p of expired) {
      this.#rows--;
      this.#bytes -= p.row.bytes;
    }
    this.#expired(expired, true);
  }

  /** Rows past their deadline, never sent: `admitted` ones were queued (a non-durable one's append resolved already). */
  #expired(rows: Pending[], admitted: boolean): void {
    const error = new LedgerTimeoutError(`${this.#where}: not committed within ${this.#timeoutMs} ms (timeoutMs): ` +
      'the transactions ahead of it got no answer from the database; it was not written');
    for (const p of rows) {
      this.#done(p, error);
      this.#flushes.fail(p.row.localSeq, error);
      if (p.durable || !admitted) p.reject(error);
      else this.#late(p.row, error);
    }
    this.#settleFlushes();
  }

  /** Runs `#pump` at `at` (the earliest asked for), for expiries and busy re-sends. */
  #arm(at: number): void {
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#pump();
    }, Math.max(0, at - performance.now()));
  }

  /** The lowest local seq not settled yet; Infinity when all are. */
  #lowest(): number {
    return Math.min(this.#queue[0]?.row.localSeq ?? Infinity, this.#waiting[0]?.row.localSeq ?? Infinity,
      ...this.#main.map((b) => b?.[0]?.row.localSeq ?? Infinity), this.#big?.[0]?.row.localSeq ?? Infinity);
  }

  /** Settles the flushes whose rows have all settled. */
  #settleFlushes(): void {
    this.#flushes.settle(this.#lowest());
    if (!this.busy) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = Infinity;
    }
  }
}
