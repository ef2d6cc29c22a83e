/**
 * Every error fullstop throws on purpose is built here (piscina's lesson: one file for errors),
 * including the argument checks that guard each public boundary. This module is imported by
 * worker threads too, so it uses nothing but the language.
 */

/** Marker that survives structured cloning, so a CancelledError that crossed threads is still known. */
export const CANCELLED_CODE = 'ERR_FULLSTOP_CANCELLED';

export interface CancelledErrorOptions {
  reason?: unknown;
  sessionId?: string;
  turnId?: string;
  /** True when the work was hard-stopped (worker terminated, process group killed). */
  hard?: boolean;
  cause?: unknown;
}

/**
 * The work was stopped by a cancel. Never a failure: a user cancel ends a turn `cancelled`.
 *
 * @example
 * try { await pool.run(task, { token }) } catch (e) { if (isCancelledError(e)) return; throw e }
 */
export class CancelledError extends Error {
  override readonly name = 'CancelledError';
  readonly code = CANCELLED_CODE;
  /** The reason given to `cancel()` (or a reason code such as `'cancel.user'`). */
  readonly reason: unknown;
  readonly sessionId: string | undefined;
  readonly turnId: string | undefined;
  /** True when the work did not stop by itself within the grace window and was killed. */
  readonly hard: boolean;

  constructor(message = 'cancelled', options: CancelledErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = options.reason;
    this.sessionId = options.sessionId;
    this.turnId = options.turnId;
    this.hard = options.hard ?? false;
  }
}

/**
 * A `CancelledError` built without capturing a stack trace, for the cancel paths themselves (a
 * worker's check that finds its token cancelled, a token's `signal.reason`). A cancel is control
 * flow, not a bug, and the capture is a measurable part of noticing one: P2 (a busy task's
 * checkCancelled() throws) medians 28.6 µs with traces, 20.8 µs without; P3 (cancelTurn() → main
 * signal) 105 µs with, 95 µs without (`node dist/bench/run.js --only P2 --only P3`, three runs
 * each). The stack's first line still names the class, which is how the error is recognised after
 * crossing threads.
 */
export function cancelledError(message: string, options: CancelledErrorOptions): CancelledError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new CancelledError(message, options);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * True for a `CancelledError`, also one that crossed a thread boundary (structured cloning keeps
 * neither the prototype nor a custom `name`, but it keeps the stack, whose first line names the class).
 */
export function isCancelledError(e: unknown): boolean {
  if (e instanceof CancelledError) return true;
  if (e === null || typeof e !== 'object') return false;
  const err = e as { name?: unknown; code?: unknown; stack?: unknown };
  return err.name === 'CancelledError' || err.code === CANCELLED_CODE ||
    (typeof err.stack === 'string' && err.stack.startsWith('CancelledError:'));
}

/**
 * A tool call could not be made (bad arguments, spawn failed). Goes back to the model as an output
 * with `success: false`; the turn goes on.
 */
export class ToolError extends Error {
  override readonly name: string = 'ToolError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The one tool error that ends the turn: status `failed`. */
export class FatalToolError extends Error {
  override readonly name: string = 'FatalToolError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A short, safe rendering of a bad value for an error message. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object (${value.constructor?.name ?? 'Object'})`;
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}

/** `name` must be a non-empty string. */
export function checkId(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${name}: expected a non-empty string, got ${describe(value)}`);
  }
}

/**
 * The longest delay a Node timer honours: `setTimeout` with more than 2^31 − 1 ms fires after 1 ms
 * (with a warning), so a longer grace or timeout would silently become no wait at all.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `name` must be a finite number in [0, MAX_TIMER_MS], or undefined (then the default applies). */
export function checkMs(name: string, value: unknown): asserts value is number | undefined {
  if (value === undefined) return;
  checkRequiredMs(name, value);
}

/** `name` must be a finite number in [0, MAX_TIMER_MS]; undefined is refused too. */
export function checkRequiredMs(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number') {
    throw new TypeError(`${name}: expected a number of milliseconds, got ${describe(value)}`);
  }
  if (!Number.isFinite(value) || value < 0 || value > MAX_TIMER_MS) {
    throw new RangeError(`${name}: expected a finite number of milliseconds from 0 to ${MAX_TIMER_MS} (the longest timer Node honours), got ${describe(value)}`);
  }
}

export function checkFunction(name: string, value: unknown): asserts value is (...args: never[]) => unknown {
  if (typeof value !== 'function') {
    throw new TypeError(`${name}: expected a function, got ${describe(value)}`);
  }
}

/**
 * The rejection of a pool task stopped through a plain `signal`, in piscina's shape so code written
 * for piscina keeps working: `name` is `'AbortError'`, the message is piscina's, `cause` is the
 * signal's reason (even when that is undefined). It is still a `CancelledError`
 * (`isCancelledError()` is true), and `hard` tells whether the worker had to be terminated.
 */
export function abortedTaskError(signalReason: unknown, options: Omit<CancelledErrorOptions, 'cause'>): CancelledError {
  const error = new CancelledError('The task has been aborted', options);
  Object.defineProperty(error, 'name', { value: 'AbortError', writable: true, configurable: true, enumerable: false });
  Object.defineProperty(error, 'cause', { value: signalReason, writable: true, configurable: true, enumerable: false });
  return error;
}
