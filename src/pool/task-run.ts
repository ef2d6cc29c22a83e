/**
 * One run of a task that has a token: the cancel rules in one place.
 *
 *   queued  + cancel → dropped now: `run` rejects at once. The payload may still reach a worker
 *                      later; the worker refuses a task whose slot no longer reads running before
 *                      any user code (workers/pool-task.ts), so it never runs.
 *   started + cancel → cooperative: the worker's checks throw; the worker is reused.
 *                      Unless a runner stop governs the grace (owners.ts), a timer of `graceMs`
 *                      then hard-stops it (`graceMs: 0`: at once, as piscina aborts).
 *   settled          → a value is never replaced, even when it arrives after the cancel.
 *
 * Rule (who owns a worker): a task run with a plain `signal` is given to piscina as abortable, so
 * piscina's rules hold for it exactly (it never shares a worker, its hard stop is piscina's
 * terminate). A task with only a token is not: it queues and shares workers as a plain task does
 * (`maxQueue`, `concurrentTasksPerWorker`), the run records which worker took it (`markStarted`,
 * from the load balancer) and the pool's `RunHost.hardStop` ends that worker — at once when the
 * task is alone on it, else once its neighbours have settled (the stopped task is abandoned and
 * rejects hard at once; no new task goes to that worker meanwhile; worker-book.ts). An abandoned
 * task whose code ends by itself first gives its worker back (`onAbandonedLeft`).
 */

import { abortedTaskError, cancelledError, isCancelledError, type CancelledError } from '../errors.js';
import { addOwnerOf, removeOwnerOf } from '../token/owners.js';
import type { LinkedOwner, OwnerEntry } from '../token/owners.js';
import { isStopGoverned } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import { RUN, type Startable, type WorkerView } from './dispatch.js';

export type Settlement = 'value' | 'error' | 'cooperative' | 'dropped' | 'hard';

export interface RunHost {
  onSettled(run: TaskRun, how: Settlement): void;
  /** The task left the queue for `worker` (piscina posts it right after). */
  onStarted(run: TaskRun): void;
  /** End the worker of a started, non-abortable run; true when the run is abandoned (rejected now). */
  hardStop(run: TaskRun): boolean;
  /** The code of an abandoned run has ended on its worker (piscina settled it after the run had). */
  onAbandonedLeft(run: TaskRun): void;
}

/** Set when the run's cancel came from a plain `signal`: the rejection is then piscina's `AbortError`. */
export interface SignalCause { aborted: boolean; reason: unknown }

/** The resolvers of the promise being made: one shared executor, no closure per run. */
const captured: { resolve: ((value: unknown) => void) | undefined; reject: ((error: unknown) => void) | undefined } = { resolve: undefined, reject: undefined };
function capture(resolve: (value: unknown) => void, reject: (error: unknown) => void): void {
  captured.resolve = resolve;
  captured.reject = reject;
}

export class TaskRun implements LinkedOwner, Startable {
  readonly kind = 'task';
  /** Its links in its token's owner list (the run is its own entry there). */
  ownerPrev: OwnerEntry | undefined = undefined;
  ownerNext: OwnerEntry | undefined = undefined;
  ownerLinked = false;
  readonly token: CancelToken;
  readonly graceMs: number;
  /** Handed to piscina as its AbortSignal (see the rule above). */
  readonly abortable: boolean;
  /** The wire payload (protocol.ts); the pool adds slab buffers to it when a worker lacks them. */
  readonly payload: unknown[];
  /** The AbortSignal side, read by piscina. */
  aborted = false;
  reason: unknown = undefined;
  started = false;
  /** The worker that took the task; `undefined` until it started. */
  worker: WorkerView | undefined;
  /** Slab ids whose buffers rode with this payload to `worker`; `undefined` if none. */
  sentSlabs: number[] | undefined;
  /** True once the hard stop was fired at this run. */
  hard = false;
  /** True when the hard stop rejected the run while its code still ran on a shared worker. */
  abandoned = false;
  done = false;
  /** `undefined` unless the task was run with a plain `signal`. */
  signal: SignalCause | undefined;
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

  constructor(host: RunHost, token: CancelToken, graceMs: number, abortable: boolean, payload: unknown[]) {
    this.#host = host;
    this.token = token;
    this.graceMs = graceMs;
    this.abortable = abortable;
    this.payload = payload;
    this.promise = new Promise(capture);
    this.#resolve = captured.resolve!;
    this.#reject = captured.reject!;
    addOwnerOf(token, this);
  }

  /** The run is its own queue options when the caller gave none (dispatch.ts `queueOptionsFor`). */
  get [RUN](): TaskRun { return this; }

  addEventListener(_type: 'abort', listener: () => void): void { this.#onAbort = listener; }
  removeEventListener(): void { this.#onAbort = undefined; }

  markStarted(worker: WorkerView): void {
    this.started = true;
    this.worker = worker;
    this.#host.onStarted(this);
  }

  get settled(): Promise<void> {
    if (this.done) return Promise.resolve();
    return (this.#settled ??= new Promise((resolve) => { this.#resolveSettled = resolve; }));
  }

  /** Token (or an ancestor) cancelled. */
  onCancel(): void {
    if (this.done) return;
    if (!this.started) return this.#drop();
    if (isStopGoverned(this.token) || this.#graceTimer !== undefined) return;
    if (this.graceMs === 0) void this.hardStop();
    else this.#graceTimer = setTimeout(() => this.hardStop(), this.graceMs);
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
    else if (this.#host.hardStop(this)) {
      this.abandoned = true;
      this.#settle('hard', this.#cancelled(undefined));
    }
    return this.settled;
  }

  #drop(): void {
    if (this.abortable) return this.#abortPiscina(); // piscina rejects now; `rejectWith` maps it
    this.#settle('dropped', this.#cancelled(undefined));
  }

  #abortPiscina(): void {
    this.aborted = true;
    this.reason = this.signal?.aborted ? this.signal.reason : this.token.reason;
    this.#onAbort?.();
  }

  /** Piscina's outcome: a value is kept even if a cancel came first; ignored once settled. */
  resolveWith(value: unknown): void {
    if (this.done) return this.#leftLate();
    this.#finish(this.token.isCancelled() ? 'cooperative' : 'value');
    this.#resolve(value);
  }

  /** Map piscina's failure to ours; an error thrown for another reason passes unchanged. */
  rejectWith(error: unknown): void {
    if (this.done) return this.#leftLate();
    if (this.hard || this.aborted) return this.#settle(this.hard ? 'hard' : 'dropped', this.#cancelled(error));
    if (isCancelledError(error)) return this.#settle('cooperative', this.#cancelled(error));
    this.#settle('error', error);
  }

  /** Piscina's outcome of a run that had settled already: an abandoned run's code is off its worker. */
  #leftLate(): void {
    if (this.abandoned) this.#host.onAbandonedLeft(this);
  }

  #settle(how: Settlement, error: unknown): void {
    this.#finish(how);
    this.#reject(error);
  }

  #cancelled(cause: unknown): CancelledError {
    const token = this.token;
    const hard = this.hard;
    const reason = token.reason;
    const sessionId = token.sessionId;
    const turnId = token.turnId;
    if (this.signal?.aborted) return abortedTaskError(this.signal.reason, { reason, sessionId, turnId, hard });
    const what = hard ? `hard-stopped after its grace window (${this.graceMs} ms or the stop's)` : this.started ? 'stopped' : 'dropped from the queue';
    // Stack-less: the rejection of a stopped task is control flow (see `cancelledError`). One
    // options object, not a spread of another: this runs on the main thread in every stop's grace.
    return cancelledError(`pool task ${what}: turn ${turnId ?? '(none)'} of session ${sessionId} was cancelled`, { reason, sessionId, turnId, hard, cause });
  }

  #finish(how: Settlement): void {
    this.done = true;
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    removeOwnerOf(this.token, this);
    this.release?.();
    this.#resolveSettled?.();
    this.#host.onSettled(this, how);
  }
}
