/**
 * The grace window: after the SIGTERM, wait up to `graceMs` for the tree to be empty, and not a
 * moment longer than it takes to get there.
 *
 * Emptiness of a process group cannot be awaited as an event (only the leader's exit is one), so
 * it is polled; the leader's exit nudges the poll so the common case ("the child exits on
 * SIGTERM") ends the window at once. A cgroup's emptiness is an event (`Tree.watch`), which nudges
 * the poll too. The nudge is latched: one given while nobody waits is not lost.
 */

import { within } from '../base/within.js';
import type { Tree } from './tree.js';

/** Poll period. A poll reads one small file (`cgroup.events`) or the stat of each recorded process. */
const POLL_MS = 5;

/**
 * A latched wake-up for one waiter at a time. Its owner nudges it for every event that can end a
 * wait (the leader's exit, a cgroup event, the hard stop's start), each subscribed once, so a
 * sleep is a timer and nothing more: a stop's grace sleeps many times, and the first sleep runs
 * inside `cancel()`.
 */
export class Wake {
  /** A nudge arrived while nobody slept: the next sleep returns at once. */
  #pending = false;
  /** Ends the current sleep; `undefined` when nobody sleeps. */
  #end: (() => void) | undefined;

  nudge(): void {
    const end = this.#end;
    this.#end = undefined; // one nudge ends one sleep; the next one latches
    if (end !== undefined) end();
    else this.#pending = true;
  }

  /** Sleep `ms`, less if nudged. */
  sleep(ms: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return within(new Promise<void>((resolve) => { this.#end = resolve; }), ms, () => { this.#end = undefined; });
  }
}

/**
 * Resolves once the tree is empty or `stopped()` says a stop began (its own sequence then ends the
 * tree), looking every `everyMs`. The timer is unref'd: a tree left to run on after its call
 * settled (docs/exec.md, "Faults") never keeps the host alive, and the host's exit kills it
 * (cleanup.ts).
 */
export async function untilEmptyOrStopped(tree: Pick<Tree, 'isEmpty'>, stopped: () => boolean, everyMs: number): Promise<void> {
  while (!stopped() && !tree.isEmpty()) {
    await new Promise<void>((resolve) => { setTimeout(resolve, everyMs).unref(); });
  }
}

/**
 * True as soon as the tree is empty; false when `ms` (Infinity: no bound, for a stop whose grace a
 * runner governs) ran out or `abort` fired (the hard stop began; its start must nudge `wake`).
 *
 * `justSignalled`: the tree was sent its SIGTERM a moment ago, so the first look waits for a nudge
 * (the leader's exit, a change of the cgroup's events) or one poll period. Right after the signal
 * the tree is almost never empty yet, and a look then is slow (most likely it contends with the
 * exits the signal has just set off), and it would sit in the stop's synchronous part, on the
 * event loop.
 */
export async function waitForEmpty(tree: Pick<Tree, 'isEmpty'>, ms: number, abort: AbortSignal, wake: Wake, justSignalled = false): Promise<boolean> {
  const deadline = performance.now() + ms;
  if (justSignalled && ms > 0 && !abort.aborted) await wake.sleep(Math.min(POLL_MS, ms));
  while (!tree.isEmpty()) {
    const left = deadline - performance.now();
    if (left <= 0 || abort.aborted) return false;
    await wake.sleep(Math.min(POLL_MS, left));
  }
  return true;
}
