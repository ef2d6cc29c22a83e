/**
 * How a `TurnPool` closes. Piscina's `close()` counts its workers when it begins and waits for a
 * "task done" message from each busy one; a worker that a hard stop terminates sends none, so a
 * close that began while a cancelled task was in its grace waited for piscina's `closeTimeout`
 * (30 s) and then rejected. The pool knows when each of its tasks ends, hard stops included, so it
 * waits for them itself first and then hands piscina a pool with nothing running, whose close is
 * immediate. Piscina is reached through its public API only (its `close`, `run`, `queueSize`).
 */

import { within } from '../base/within.js';

/**
 * Why a task run after `close()` began is refused: piscina's own reason while it closes (its
 * `AbortError`, made by piscina from an aborted signal, so the rejection is exactly piscina's).
 */
export const CLOSING_REASON = 'queue is being terminated';

/** One wait for "nothing left to wait for", re-checked whenever a task settles. */
export class IdleWait {
  /** `undefined` unless a close is waiting. */
  #waiter: { idle: () => boolean; resolve: () => void } | undefined;

  /**
   * Resolves once `idle()` holds, or after `timeoutMs` (then piscina's own close takes over, with
   * its own timeout: a task that never ends still cannot hold the close for ever).
   */
  until(idle: () => boolean, timeoutMs: number): Promise<void> {
    if (idle()) return Promise.resolve();
    // Unref'd, as piscina's own close timer is: a close must not keep the process alive.
    const waiter = { idle, resolve: () => {} };
    const idleNow = new Promise<void>((resolve) => { waiter.resolve = resolve; });
    this.#waiter = waiter;
    const forget = () => { if (this.#waiter === waiter) this.#waiter = undefined; };
    return within(idleNow, timeoutMs, forget, { unref: true }).then(forget);
  }

  /** A task settled (or a worker came up): resolve the wait if nothing is left. Cheap when nobody waits. */
  check(): void {
    if (this.#waiter !== undefined && this.#waiter.idle()) this.#waiter.resolve();
  }
}
