/**
 * One run of a task that has a token: the cancel rules of issue #3 in one place.
 *
 *   queued  + cancel → dropped now: `run` rejects at once. The payload may still reach a worker
 *                      later; the worker refuses a task whose slot no longer reads running before
 *                      any user code (workers/pool-task.ts), so it never runs.
 *   started + cancel → cooperative: the worker's checks throw; the worker is reused.
 *                      Unless a runner stop governs the grace (owners.ts), a timer of `graceMs`
 *                      then hard-stops it: its worker thread is terminated and piscina respawns one.
 *   settled          → a value is never replaced, even when it arrives after the cancel.
 *
 * Rule: with one task per worker (piscina's default) a task is *not* given to piscina as
 * abortable. Piscina routes abortable tasks around its queue (they ignore `maxQueue`, and each
 * submit costs ~3 µs more — measured, P5), so instead the run records which thread took it
 * (`markStarted`) and the hard stop terminates that thread itself. With several tasks per worker a
 * terminate would take the neighbours down too, so there the run is handed to piscina as its
 * AbortSignal and piscina's "an abortable task owns its worker" rule keeps it alone on its thread.
 */

import { CancelledError, isCancelledError } from '../errors.js';
import { addOwnerOf, removeOwnerOf } from '../token/owners.js';
import type { Owner } from '../token/state.js';
import { isStopGoverned } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import type { Startable } from './dispatch.js';

export type Settlement = 'value' | 'error' | 'cooperative' | 'dropped' | 'hard';

export interface RunHost {
  onSettled(how: Settlement): void;
  /** Terminate the worker thread `threadId` (the pool respawns one). */
  terminate(threadId: number): void;
}

export class TaskRun implements Owner, Startable {
  readonly kind = 'task';
  readonly token: CancelToken;
  readonly graceMs: number;
  /** Handed to piscina as its AbortSignal (see the rule above). */
  readonly abortable: boolean;
  /** The AbortSignal side, read by piscina. */
  aborted = false;
  reason: unknown = undefined;
  started = false;
  /** The thread that took the task; `undefined` until it started. */
  threadId: number | undefined;
  /** True once the hard stop was fired at this run. */
  hard = false;
  done = false;
  /** Undoes what the pool set up for this run alone (a plain signal's token); `undefined` if nothing. */
  release: (() => void) | undefined;
  readonly promise: Promise<unknown>;
  #resolve!: (value: unknown) => void;
  #reject!: (error: unknown) => void;
  /** Piscina's abort listener; `undefined` unless abortable and registered. */
  #onAbort: (() => void) | undefined;
  /** `undefined` unless a grace timer is pending. */
  #graceTimer: NodeJS.Timeout | undefined;
  #settled: Promise<void> | undefined;
  #resolveSettled: (() => void) | undefined;
  readonly #host: RunHost;

  constructor(host: RunHost, token: CancelToken, graceMs: number, abortable: boolean) {
    this.#host = host;
    this.token = token;
    this.graceMs = graceMs;
    this.abortable = abortable;
    this.promise = new Promise((resolve, reject) => { this.#resolve = resolve; this.#reject = reject; });
    addOwnerOf(token, this);
  }

  addEventListener(_type: 'abort', listener: () => void): void { this.#onAbort = listener; }
  removeEventListener(): void { this.#onAbort = undefined; }

  markStarted(threadId: number): void {
    this.started = true;
    this.threadId = threadId;
  }

  get settled(): Promise<void> {
    if (this.done) return Promise.resolve();
    return (this.#settled ??= new Promise((resolve) => { this.#resolveSettled = resolve; }));
  }

  /** Token (or an ancestor) cancelled. */
  onCancel(): void {
    if (this.done) return;
    if (!this.started) return this.#drop();
    if (!isStopGoverned(this.token) && this.#graceTimer === undefined) {
      this.#graceTimer = setTimeout(() => this.hardStop(), this.graceMs);
    }
  }

  /** The turn ended while the task runs: its slot reads retired, so it is the same as a cancel. */
  onRetire(): void { this.onCancel(); }

  hardStop(): Promise<void> {
    if (this.done) return this.settled;
    if (!this.started) {
      this.#drop();
      return this.settled;
    }
    this.hard = true;
    if (this.abortable) this.#abortPiscina();
    else this.#host.terminate(this.threadId!);
    return this.settled;
  }

  #drop(): void {
    if (this.abortable) return this.#abortPiscina(); // piscina rejects now; `settle` maps it
    this.#finish('dropped');
    this.#reject(this.#cancelled(undefined));
  }

  #abortPiscina(): void {
    this.aborted = true;
    this.reason = this.token.reason;
    this.#onAbort?.();
  }

  /** Piscina's outcome: a value is kept even if a cancel came first; ignored once dropped. */
  resolveWith(value: unknown): void {
    if (this.done) return;
    this.#finish(this.token.isCancelled() ? 'cooperative' : 'value');
    this.#resolve(value);
  }

  /** Map piscina's failure to ours; an error thrown for another reason passes unchanged. */
  rejectWith(error: unknown): void {
    if (this.done) return;
    if (this.hard || this.aborted) {
      this.#finish(this.hard ? 'hard' : 'dropped');
      return this.#reject(this.#cancelled(error));
    }
    if (isCancelledError(error)) {
      this.#finish('cooperative');
      return this.#reject(this.#cancelled(error));
    }
    this.#finish('error');
    this.#reject(error);
  }

  #cancelled(cause: unknown): CancelledError {
    const what = this.hard ? `hard-stopped after its grace window (${this.graceMs} ms or the stop's)` : this.started ? 'stopped' : 'dropped from the queue';
    return new CancelledError(`pool task ${what}: turn ${this.token.turnId ?? '(none)'} of session ${this.token.sessionId} was cancelled`, {
      reason: this.token.reason, sessionId: this.token.sessionId, turnId: this.token.turnId, hard: this.hard, cause,
    });
  }

  #finish(how: Settlement): void {
    this.done = true;
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    removeOwnerOf(this.token, this);
    this.release?.();
    this.#resolveSettled?.();
    this.#host.onSettled(how);
  }
}
