// Runs in worker threads (and on the main thread for a handle passed to tokenFromHandle there).
/**
 * `WorkerToken`: a token seen from another thread, through its slot alone.
 *
 * It holds no state but the cells view and its generation, so it is as cheap as a raw
 * `Atomics.load` to check. "Cancelled" here means "no longer running": a cancelled slot, a
 * retired one, and one handed to a later generation all read the same, because for this holder
 * the turn is over either way (slot.ts, invariant 3).
 */

import { StopReasons } from '../src/constants.js';
import { cancelledError, checkRequiredMs, type CancelledError } from '../src/errors.js';
import {
  cancelSlotFromHandle, cellsOfHandle, pack, sleepOnSlot, STATE_CANCELLED, STATE_RUNNING, waitWhilePaused,
  type TokenHandle,
} from '../src/token/slot.js';

/** A turn's token as a thread other than its owner sees it (`tokenFromHandle`). */
export interface WorkerToken {
  /** True once the token is cancelled or retired (one `Atomics.load`). */
  isCancelled(): boolean;
  /** Throws `CancelledError` if the token is cancelled or retired. */
  checkCancelled(): void;
  /**
   * `Atomics.wait` on the slot for up to `ms`; wakes at once on cancel or retire and then throws.
   * `ms` is required: a TypeError for a missing or non-number value, a RangeError outside
   * [0, 2^31 − 1] (an unbounded wait is a bug, not a default).
   */
  sleep(ms: number): void;
  /**
   * `sleep` that returns instead of throwing: `Atomics.wait` on the slot for up to `ms`; `true`
   * when the time ran out with the token still running, `false` as soon as it is cancelled or
   * retired (at once if it already is). For a loop that ends on cancel by itself, it spares the
   * woken thread the throw. `ms` as for `sleep`.
   */
  sleepUnlessCancelled(ms: number): boolean;
  /** Cancel the token from this thread. False if it is retired or its slot has been reused. */
  cancel(reason?: unknown): boolean;
}

/** The `WorkerToken` of one slot; the pool task binding holds one per task (not exported by `fullstop/worker`). */
export class SlotToken implements WorkerToken {
  readonly cells: Int32Array;
  readonly index: number;
  readonly generation: number;
  readonly #running: number;
  /** The slot's word once this generation is cancelled (any other word than these two reads as retired). */
  readonly #cancelled: number;
  /** The error the next check that finds the token cancelled throws; `undefined` until a check found it running. */
  #ready: CancelledError | undefined;
  /** The turn's root token when this one is a child (a pool task's tool token); `cancelTurn` trips it. */
  root: SlotToken | undefined;

  constructor(cells: Int32Array, index: number, generation: number) {
    this.cells = cells;
    this.index = index;
    this.generation = generation;
    this.#running = pack(generation, STATE_RUNNING);
    this.#cancelled = pack(generation, STATE_CANCELLED);
  }

  isCancelled(): boolean {
    return Atomics.load(this.cells, this.index) !== this.#running;
  }

  checkCancelled(): void {
    const error = this.checkError();
    if (error !== undefined) throw error;
  }

  /**
   * `checkCancelled` without the throw: `undefined` while the token runs, else the error the check
   * throws. `fullstop/worker`'s `checkCancelled()` throws it itself, one frame nearer the task's
   * `catch` (see `sleepOrError`).
   */
  checkError(): CancelledError | undefined {
    const word = Atomics.load(this.cells, this.index);
    if (word === this.#running) {
      // Built while the token runs, so the check that finds it cancelled only has to throw:
      // building an Error is most of the time between a cancel and its throw on a thread
      // whose caches have gone cold (the bench's P2 row). One build a token, at its first check.
      if (this.#ready === undefined) this.#ready = this.error(true);
      return undefined;
    }
    return this.#errorFor(word);
  }

  /** The error of a check that read `word`: the one built ahead when it was a cancel (once), else a fresh one. */
  #errorFor(word: number): CancelledError {
    const cancelled = word === this.#cancelled;
    const ready = this.#ready;
    if (!cancelled || ready === undefined) return this.error(cancelled);
    // Each throw gets its own object: a caller that catches, changes and checks again sees a new one.
    this.#ready = undefined;
    return ready;
  }

  sleep(ms: number): void {
    checkRequiredMs('ms', ms);
    const error = this.sleepOrError(ms);
    if (error !== undefined) throw error;
  }

  /**
   * `sleep` without the check of `ms` and without the throw: `undefined` when `ms` ran out, else
   * the error `sleep` throws. `fullstop/worker`'s `sleep()` throws it itself, so the error unwinds
   * one frame fewer on the way to the task's `catch` (a thread just woken pays for every frame).
   */
  sleepOrError(ms: number): CancelledError | undefined {
    // Built before blocking, returned after waking: work done on a thread that has just been woken
    // is slow, and building it here takes that work off the wake path (the bench's P1 row).
    // A sleep blocks, so building one error that may go unused is never a hot cost.
    const cancelled = this.error(true);
    const word = sleepOnSlot(this.cells, this.index, this.#running, ms);
    if (word === this.#running) return undefined;
    return word === this.#cancelled ? cancelled : this.error(false);
  }

  sleepUnlessCancelled(ms: number): boolean {
    checkRequiredMs('ms', ms);
    return sleepOnSlot(this.cells, this.index, this.#running, ms) === this.#running;
  }

  /** Block while the registry is paused; a cancel or retire wakes it, and then it throws. */
  checkpoint(): void {
    // One check after the wait covers both cases: not paused (the wait returns at once) and
    // paused (it returns when resumed, or at once when the slot leaves RUNNING).
    waitWhilePaused(this.cells, this.index, this.generation);
    this.checkCancelled();
  }

  cancel(_reason?: unknown): boolean {
    // The reason cannot travel through an Int32; the main thread sees 'cancel.user'.
    return cancelSlotFromHandle(this.cells, this.index, this.#running, this.#cancelled) ||
      Atomics.load(this.cells, this.index) === this.#cancelled;
  }

  /** The error of a check that found the token not running (`cancelled`: which way it ended). */
  error(cancelled = Atomics.load(this.cells, this.index) === this.#cancelled): CancelledError {
    return cancelled
      ? cancelledError('the turn is cancelled', { reason: StopReasons.user })
      : cancelledError('the turn is over (token retired)', { reason: 'retired' });
  }
}

/** A `WorkerToken` for a handle received from the main thread (for threads you start yourself). */
export function tokenFromHandle(handle: TokenHandle): WorkerToken {
  return new SlotToken(cellsOfHandle(handle), handle.index, handle.generation);
}
