/**
 * Group commit: the appends of one `PgLedger` share transactions.
 *
 * Invariants:
 * 1. At most one transaction is in flight. Rows appended meanwhile, or in the same synchronous
 *    run, wait in `#queue` and all go in the next one (one multi-row call), in the order they
 *    were appended; so a storm of
 *    concurrent stops costs a few transactions, not two a stop, and order is kept across batches.
 * 2. Every row settles within `timeoutMs` of its append: a batch is sent with the time its oldest
 *    row has left, and a row still queued at its deadline (the transaction ahead never answered)
 *    is rejected and never sent.
 * 3. A rejected row was not written, except when the answer of a commit was lost and the re-sends
 *    ran out of time: then it may have been written, once (appender.ts).
 * 4. A flush waits for the rows appended before it that are not settled yet, and rejects if one
 *    of them failed to commit (a refusal of the row itself — an ended turn, a used turn id — is
 *    its append's rejection, not the flush's).
 */

import { LedgerTimeoutError } from '../../errors.js';
import { reported } from './pool.js';
import type { Appender, Row, Verdict } from './appender.js';

/** A row with its append's promise and its deadline (`performance.now()` time). */
interface Pending {
  row: Row;
  deadline: number;
  resolve(): void;
  reject(error: unknown): void;
}

/** A flush: resolves once every row up to `target` has settled; `error` is the first failure among them. */
interface FlushWaiter {
  target: number;
  error: unknown;
  resolve(): void;
  reject(error: unknown): void;
}

export class GroupCommit {
  readonly #appender: Appender;
  readonly #timeoutMs: number;
  readonly #where: string;
  /** The refusal of a row for its verdict (`used`, `ended`); `undefined` for `ok`. */
  readonly #refusal: (row: Row, verdict: Verdict) => Error | undefined;
  /** Rows waiting for the next transaction, oldest first. */
  #queue: Pending[] = [];
  /** The rows of the transaction in flight; `undefined` when none is. */
  #inFlight: Pending[] | undefined;
  /** Flushes under way, by increasing target. */
  #flushes: FlushWaiter[] = [];
  /** Fires at the oldest queued row's deadline while a transaction is in flight (invariant 2). */
  #expiry: NodeJS.Timeout | undefined;

  constructor(appender: Appender, timeoutMs: number, where: string, refusal: (row: Row, verdict: Verdict) => Error | undefined) {
    this.#appender = appender;
    this.#timeoutMs = timeoutMs;
    this.#where = where;
    this.#refusal = refusal;
  }

  /** Queues `row`; resolves once it is committed, rejects when it was refused or failed. */
  add(row: Row): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ row, deadline: performance.now() + this.#timeoutMs, resolve, reject });
      // Sent at the end of this synchronous run, not at the first append of it: a stop's history
      // (its aborted outputs, the marker, `cancelled`, appended back to back) is one transaction.
      if (this.#queue.length === 1 && this.#inFlight === undefined) queueMicrotask(() => this.#pump());
      else if (this.#inFlight !== undefined && this.#expiry === undefined) this.#armExpiry();
    });
  }

  /** Resolves once every row queued so far has settled; rejects with the first that failed to commit (invariant 4). */
  flush(): Promise<void> {
    const target = this.#queue.at(-1)?.row.localSeq ?? this.#inFlight?.at(-1)?.row.localSeq;
    if (target === undefined) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.#flushes.push({ target, error: undefined, resolve, reject }));
  }

  /** True while a row is queued or in flight. */
  get busy(): boolean {
    return this.#inFlight !== undefined || this.#queue.length > 0;
  }

  /** Sends the queue as one transaction, unless one is in flight (invariant 1). */
  #pump(): void {
    if (this.#inFlight !== undefined) {
      if (this.#expiry === undefined) this.#armExpiry();
      return;
    }
    this.#expire();
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    this.#inFlight = batch;
    const left = batch[0]!.deadline - performance.now();
    this.#appender.send(batch.map((p) => p.row), left).then(
      (verdicts) => this.#committed(batch, verdicts),
      (error: unknown) => this.#failed(batch, error),
    ).finally(() => {
      this.#inFlight = undefined;
      this.#settleFlushes();
      this.#pump();
    });
  }

  #committed(batch: Pending[], verdicts: Verdict[]): void {
    batch.forEach((pending, i) => {
      const refusal = this.#refusal(pending.row, verdicts[i] ?? 'stale');
      if (refusal === undefined) pending.resolve();
      else pending.reject(refusal);
    });
  }

  #failed(batch: Pending[], error: unknown): void {
    const told = reported(error);
    this.#markFlushes(batch[0]!.row.localSeq, told);
    for (const pending of batch) pending.reject(told);
  }

  /** Rejects the queued rows past their deadline, oldest first; they were never sent (invariant 2). */
  #expire(): void {
    const now = performance.now();
    let n = 0;
    while (n < this.#queue.length && this.#queue[n]!.deadline <= now) n++;
    if (n === 0) return;
    const expired = this.#queue.splice(0, n);
    const error = new LedgerTimeoutError(`${this.#where}: not committed within ${this.#timeoutMs} ms (timeoutMs): ` +
      'the transaction ahead of it got no answer from the database; it was not written');
    this.#markFlushes(expired[0]!.row.localSeq, error);
    for (const pending of expired) pending.reject(error);
    this.#settleFlushes();
  }

  #armExpiry(): void {
    clearTimeout(this.#expiry);
    this.#expiry = undefined;
    const oldest = this.#queue[0];
    if (oldest === undefined) return;
    this.#expiry = setTimeout(() => {
      this.#expiry = undefined;
      this.#expire();
      if (this.#inFlight !== undefined) this.#armExpiry();
    }, Math.max(0, oldest.deadline - performance.now()));
  }

  /** Every flush waiting on a row from `localSeq` on fails with `error` (if none failed it before). */
  #markFlushes(localSeq: number, error: unknown): void {
    for (let i = this.#flushes.length - 1; i >= 0 && this.#flushes[i]!.target >= localSeq; i--) this.#flushes[i]!.error ??= error;
  }

  /** Settles the flushes whose rows have all settled (rows settle in order: in-flight ones, then the queue). */
  #settleFlushes(): void {
    const lowest = this.#inFlight?.[0]?.row.localSeq ?? this.#queue[0]?.row.localSeq ?? Infinity;
    while (this.#flushes.length > 0 && this.#flushes[0]!.target < lowest) {
      const waiter = this.#flushes.shift()!;
      if (waiter.error === undefined) waiter.resolve();
      else waiter.reject(waiter.error);
    }
    if (!this.busy) {
      clearTimeout(this.#expiry);
      this.#expiry = undefined;
    }
  }
}
