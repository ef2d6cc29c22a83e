/**
 * The one timeout race: a promise's outcome, or what `onTimeout` gives once `ms` pass first.
 *
 * Invariants:
 * 1. The timer is cleared the moment `promise` settles, so a bound never holds the event loop open
 *    nor fires after the outcome is known (no leaked timer, however long `ms` is).
 * 2. The first outcome wins: `onTimeout` runs at most once, and never after `promise` settled.
 * 3. The promise goes on after a timeout: `within` only stops waiting for it. A caller that must
 *    undo a late result (release a late connection) does it in `onTimeout`.
 * 4. `onTimeout` throwing (or returning a rejected promise) rejects the result: that is how a
 *    bound becomes an error (`() => { throw new LedgerTimeoutError(…) }`).
 */

/** Options of `within`. */
export interface WithinOptions {
  /** Let the process exit while only this bound is pending (`timer.unref()`). @default false */
  unref?: boolean;
}

/**
 * `promise`'s outcome, or `onTimeout()`'s once `ms` pass first (see the invariants above).
 *
 * @example
 * const closed = await within(allClosed(outputs).then(() => true), boundMs, () => false);
 */
export function within<T, U = never>(promise: PromiseLike<T>, ms: number, onTimeout: () => U | PromiseLike<U>, options: WithinOptions = {}): Promise<T | U> {
  return new Promise<T | U>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      try {
        resolve(onTimeout());
      } catch (error) {
        reject(error);
      }
    }, ms);
    if (options.unref === true) timer.unref();
    promise.then(
      (value) => { if (!settled) { settled = true; clearTimeout(timer); resolve(value); } },
      (error: unknown) => { if (!settled) { settled = true; clearTimeout(timer); reject(error); } },
    );
  });
}

/** Resolves after `ms` or once `promise` settles, whichever is first; never rejects (a bounded wait). */
export function waitAtMost(promise: PromiseLike<unknown>, ms: number, options: WithinOptions = {}): Promise<void> {
  return within(Promise.resolve(promise).then(noop, noop), ms, noop, options);
}

function noop(): void {}
