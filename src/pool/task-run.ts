/**
 * One run of a task that has a token: the cancel rules of issue #3 in one place.
 *
 *   queued  + cancel → dropped now (piscina removes it from its queue); rejects, never ran.
 *   started + cancel → cooperative: the worker's checks throw; the worker is reused.
 *                      Unless a runner stop governs the grace (owners.ts), a timer of `graceMs`
 *                      then hard-stops it: piscina terminates the worker and respawns one.
 *   settled          → a value is never replaced, even when it arrives after the cancel.
 *
 * The run doubles as the AbortSignal piscina is given (a fresh AbortController per task is
 * measurably slower) and as the token's owner, so one object holds every piece of the task's
 * cancel state.
 */

import { CancelledError, isCancelledError } from '../errors.js';
import type { Owner } from '../token/state.js';
import { isStopGoverned } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import type { Startable } from './dispatch.js';

export interface RunHost {
  readonly graceMs: number;
  onSettled(how: 'value' | 'error' | 'cooperative' | 'dropped' | 'hard'): void;
}

export class TaskRun implements Owner, Startable {
  readonly kind = 'task';
  readonly token: CancelToken;
  readonly graceMs: number;
  /** Read by piscina (the AbortSignal side). */
  aborted = false;
  reason: unknown = undefined;
  started = false;
  /** True once the hard stop was fired at this run. */
  hard = false;
  done = false;
  dispose: () => void = () => {};
  /** Undoes what the pool set up for this run alone (a plain signal's token); `undefined` if nothing. */
  release: (() => void) | undefined;
  /** Piscina's abort listener; `undefined` until piscina registers it or after it removes it. */
  #onAbort: (() => void) | undefined;
  /** `undefined` unless a grace timer is pending. */
  #graceTimer: NodeJS.Timeout | undefined;
  #settled: Promise<void> | undefined;
  #resolveSettled: (() => void) | undefined;
  readonly #host: RunHost;

  constructor(host: RunHost, token: CancelToken, graceMs: number) {
    this.#host = host;
    this.token = token;
    this.graceMs = graceMs;
  }

  addEventListener(_type: 'abort', listener: () => void): void { this.#onAbort = listener; }
  removeEventListener(): void { this.#onAbort = undefined; }

  markStarted(): void { this.started = true; }

  get settled(): Promise<void> {
    if (this.done) return Promise.resolve();
    return (this.#settled ??= new Promise((resolve) => { this.#resolveSettled = resolve; }));
  }

  /** Token (or an ancestor) cancelled. */
  onCancel(): void {
    if (this.done) return;
    if (!this.started) return this.#abortPiscina();
    if (!isStopGoverned(this.token) && this.#graceTimer === undefined) {
      this.#graceTimer = setTimeout(() => this.hardStop(), this.graceMs);
    }
  }

  /** The turn ended while the task runs: its slot reads retired, so it is the same as a cancel. */
  onRetire(): void { this.onCancel(); }

  hardStop(): Promise<void> {
    if (!this.done) {
      this.hard = this.started;
      this.#abortPiscina();
    }
    return this.settled;
  }

  #abortPiscina(): void {
    this.aborted = true;
    this.reason = this.token.reason;
    this.#onAbort?.();
  }

  /** The task's value: kept even if a cancel came first. */
  resolve<R>(value: R): R {
    this.#finish(this.token.isCancelled() ? 'cooperative' : 'value');
    return value;
  }

  /** Map piscina's outcome to ours; an error thrown for another reason passes unchanged. */
  reject(error: unknown): never {
    if (this.aborted) {
      this.#finish(this.hard ? 'hard' : 'dropped');
      throw this.#cancelled(error);
    }
    if (isCancelledError(error)) {
      this.#finish('cooperative');
      throw this.#cancelled(error);
    }
    this.#finish('error');
    throw error;
  }

  #cancelled(cause: unknown): CancelledError {
    const what = this.hard ? `hard-stopped after ${this.graceMs} ms of grace` : this.started ? 'stopped' : 'dropped from the queue';
    return new CancelledError(`pool task ${what}: turn ${this.token.turnId ?? '(none)'} of session ${this.token.sessionId} was cancelled`, {
      reason: this.token.reason, sessionId: this.token.sessionId, turnId: this.token.turnId, hard: this.hard, cause,
    });
  }

  #finish(how: 'value' | 'error' | 'cooperative' | 'dropped' | 'hard'): void {
    this.done = true;
    if (this.#graceTimer !== undefined) clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    this.dispose();
    this.release?.();
    this.#resolveSettled?.();
    this.#host.onSettled(how);
  }
}
