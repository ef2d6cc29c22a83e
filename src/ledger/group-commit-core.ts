/**
 * The part of group commit both stores share: flushes waiting, by seq, for items committed in
 * batches. The file `Ledger`'s writer (writer.ts: lines made durable by a write and an
 * `fdatasync`) and `PgLedger`'s group commit (postgres/group-commit.ts: rows made durable by a
 * transaction) each keep their transport — what a batch is, when one goes, how an item settles —
 * and say here only which seqs have settled and which failed.
 *
 * Invariants:
 * 1. Seqs increase: items are admitted (`admit`) in seq order, so a flush's target — the last seq
 *    admitted when it was called — never falls, and the waiting flushes are kept in target order
 *    (a flush is pushed at the end, settled from the front).
 * 2. A flush resolves once every item up to its target has settled: the transport tells it by
 *    `settle(lowest)`, `lowest` being the lowest seq not settled yet (items settle out of order in
 *    `PgLedger`, whose lanes and busy retries reorder them; in seq order in the file). A flush
 *    called with nothing unsettled up to its target resolves at once.
 * 3. A flush rejects instead, at that same moment, with the first failure `fail(seq, …)` reported
 *    for an item up to its target (a later item's failure is not its own); it still waits for the
 *    rest of its items, so a flush never settles before what came before it.
 * 4. Settled flushes leave the queue before any is answered; the resolved ones are answered
 *    through `release` first (the file's writer answers them a slice per turn of the event loop,
 *    release.ts), then the rejected ones, in target order.
 */

/** A flush: resolves once every item up to `target` has settled; `error` is the first failure among them. */
interface FlushWaiter {
  readonly target: number;
  error: unknown;
  resolve(): void;
  reject(error: unknown): void;
}

/** Answers flushes that resolved, in target order (invariant 4). */
export type Release = (resolved: readonly { resolve(): void }[]) => void;

/** The flushes of one store waiting for its items to settle (see the invariants above). */
export class FlushQueue {
  /** The last seq admitted (invariant 1). */
  #last: number;
  /** Flushes under way, by increasing target. */
  #waiters: FlushWaiter[] = [];
  readonly #release: Release;

  /** `last`: the last seq admitted before this queue (settled). */
  constructor(last: number, release: Release = resolveAll) {
    this.#last = last;
    this.#release = release;
  }

  /** The last seq admitted: what a flush called now waits for. */
  get last(): number { return this.#last; }

  /** The highest target a flush waits for; -Infinity when none waits. */
  get target(): number { return this.#waiters.at(-1)?.target ?? -Infinity; }

  /** Records `seq` as admitted; seqs increase (invariant 1). */
  admit(seq: number): void {
    this.#last = seq;
  }

  /**
   * A flush of every item admitted so far: resolves once they have settled, rejects with the first
   * of them that failed (invariants 2, 3). `lowest`: the lowest seq not settled now.
   */
  wait(lowest: number): Promise<void> {
    const target = this.#last;
    if (lowest > target) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.#waiters.push({ target, error: undefined, resolve, reject }));
  }

  /** Every flush waiting for `seq` (target ≥ `seq`) fails with `error`, if none failed it before (invariant 3). */
  fail(seq: number, error: unknown): void {
    for (let i = this.#waiters.length - 1; i >= 0 && this.#waiters[i]!.target >= seq; i--) this.#waiters[i]!.error ??= error;
  }

  /** Answers the flushes whose items have all settled: every seq below `lowest` (invariants 2, 4). */
  settle(lowest: number): void {
    let count = 0;
    while (count < this.#waiters.length && this.#waiters[count]!.target < lowest) count++;
    if (count === 0) return;
    const settled = this.#waiters.splice(0, count);
    const resolved = settled.filter((waiter) => waiter.error === undefined);
    if (resolved.length > 0) this.#release(resolved);
    for (const waiter of settled) if (waiter.error !== undefined) waiter.reject(waiter.error);
  }
}

/** Resolves every flush now, in order. */
function resolveAll(resolved: readonly { resolve(): void }[]): void {
  for (const waiter of resolved) waiter.resolve();
}
