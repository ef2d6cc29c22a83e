// Runs on both threads: main and workers. It uses nothing but the language, so a worker can load it.
/**
 * Every error fullstop throws on purpose is built here (piscina's lesson: one file for errors),
 * including the argument checks that guard each public boundary, and the one safe way to turn a
 * value given by a caller (a cancel reason, a thrown value) into text: `renderReason`.
 */

import { ErrorCodes, MAX_ID_LENGTH } from './constants.js';

/**
 * Marker that survives structured cloning, so a CancelledError that crossed threads is still known.
 * Not exported from a package entry.
 */
export const CANCELLED_CODE = ErrorCodes.cancelled;

/** What a `CancelledError` carries besides its message. */
export interface CancelledErrorOptions {
  /** The cancel's reason, kept as given. */
  reason?: unknown;
  /** The session of the cancelled turn. */
  sessionId?: string;
  /** The cancelled turn. */
  turnId?: string;
  /** True when the work was hard-stopped (worker terminated, process group killed). */
  hard?: boolean;
  /** The error this one wraps, as `Error.cause`. */
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
  /** `'ERR_FULLSTOP_CANCELLED'`: kept by structured cloning, so `isCancelledError` knows a clone. */
  readonly code = CANCELLED_CODE;
  /** The reason given to `cancel()`, kept as given (or a reason code such as `'cancel.user'`). */
  readonly reason: unknown;
  /** The session of the cancelled turn, when known. */
  readonly sessionId: string | undefined;
  /** The cancelled turn, when known. */
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
 * flow, not a bug, and capturing a trace is a measurable part of the time it takes to notice one
 * (bench rows P2 and P3). The stack's first line still names the class, which is how the
 * error is recognised after crossing threads.
 * Not exported from a package entry.
 */
export function cancelledError(message: string, options: CancelledErrorOptions): CancelledError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  let error: CancelledError;
  try {
    error = new CancelledError(message, options);
  } finally {
    Error.stackTraceLimit = limit;
  }
  // Its stack is its first line, set rather than read: reading `stack` on V8 formats it (a few µs a
  // stop, for a trace with no frames), Bun gives an error made with no frames no stack at all, and a
  // worker may have replaced Error.prepareStackTrace. Its structured clone keeps neither `name` nor
  // `code` on Bun: the stack's first line is then the one mark that crosses a thread.
  Object.defineProperty(error, 'stack', { value: `CancelledError: ${message}`, writable: true, configurable: true, enumerable: false });
  return error;
}

/**
 * A `CancelledError` named `'AbortError'`, for a token's `signal.reason`: libraries that take an
 * `AbortSignal` (fetch, the AI SDK, the OpenAI SDK, node-redis) recognise an abort by that name
 * and take their own abort path, where another name reads to them as a failure. It is still a
 * `CancelledError` (`instanceof`, `code`, `isCancelledError`).
 * Not exported from a package entry.
 */
export function abortReasonError(message: string, options: CancelledErrorOptions): CancelledError {
  const error = cancelledError(message, options);
  Object.defineProperty(error, 'name', { value: 'AbortError', writable: true, configurable: true, enumerable: false });
  return error;
}

/** How many `cause` links `isCancelledError` follows from the error it is given. */
const CAUSE_DEPTH = 8;

/**
 * True for a `CancelledError`, also one that crossed a thread boundary (structured cloning keeps
 * neither the prototype nor a custom `name`, but it keeps `code` and the stack, whose first line
 * names the class), and for an error that wraps one as its `cause`, up to 8 links deep (a library
 * that reports a stop as its own error, e.g. the AI SDK's `AI_APICallError`, keeps it there).
 */
export function isCancelledError(e: unknown): boolean {
  let current = e;
  for (let depth = 0; depth <= CAUSE_DEPTH; depth++) {
    if (isCancelledItself(current)) return true;
    try {
      if (current === null || typeof current !== 'object') return false;
      current = (current as { cause?: unknown }).cause;
    } catch {
      return false; // a throwing `cause` getter (a Proxy) ends the walk
    }
  }
  return false;
}

function isCancelledItself(e: unknown): boolean {
  if (e === null || typeof e !== 'object') return false;
  try {
    if (e instanceof CancelledError) return true;
    const err = e as { name?: unknown; code?: unknown; stack?: unknown };
    return err.name === 'CancelledError' || err.code === CANCELLED_CODE ||
      (typeof err.stack === 'string' && err.stack.startsWith('CancelledError:'));
  } catch {
    return false; // a Proxy whose traps throw is not ours
  }
}

/**
 * A tool call could not be made (bad arguments, spawn failed). Goes back to the model as an output
 * with `success: false`; the turn goes on.
 */
export class ToolError extends Error {
  override readonly name: string = 'ToolError';
  /** `'ERR_FULLSTOP_TOOL'` */
  readonly code: string = ErrorCodes.tool;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The one tool error that ends the turn: status `failed`. */
export class FatalToolError extends Error {
  override readonly name: string = 'FatalToolError';
  /** `'ERR_FULLSTOP_FATAL_TOOL'` */
  readonly code: string = ErrorCodes.fatalTool;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The session already has a running turn: `run` started nothing. The one way fullstop says "busy",
 * from `TurnRunner.run` and from `Fleet.run` (where the turn may run on another instance).
 */
export class SessionBusyError extends Error {
  override readonly name: string = 'SessionBusyError';
  /** `'ERR_FULLSTOP_SESSION_BUSY'` */
  readonly code: string = ErrorCodes.sessionBusy;
  /** The busy session. */
  readonly sessionId: string;
  constructor(message: string, sessionId: string, options?: { cause?: unknown }) {
    super(message, options);
    this.sessionId = sessionId;
  }
}

/** The turn id was used before (by a running turn, or in the ledger): `run` started nothing. */
export class TurnIdUsedError extends Error {
  override readonly name: string = 'TurnIdUsedError';
  /** `'ERR_FULLSTOP_TURN_ID_USED'` */
  readonly code: string = ErrorCodes.turnIdUsed;
  /** The refused turn id. */
  readonly turnId: string;
  constructor(message: string, turnId: string) {
    super(message);
    this.turnId = turnId;
  }
}

/**
 * A store refused an entry of a turn whose terminal status it already holds: nothing of a turn is
 * recorded after its end (`LedgerStore` promise 4). The same class from every store.
 */
export class TurnEndedError extends Error {
  override readonly name: string = 'TurnEndedError';
  /** `'ERR_FULLSTOP_TURN_ENDED'` */
  readonly code: string = ErrorCodes.turnEnded;
  /** The ended turn. */
  readonly turnId: string;
  constructor(message: string, turnId: string) {
    super(message);
    this.turnId = turnId;
  }
}

/**
 * A store refused a call made after its `close()` (an append, `removeSegments`,
 * `closeAbandonedTurn`). The same class from every store.
 */
export class LedgerClosedError extends Error {
  override readonly name: string = 'LedgerClosedError';
  /** `'ERR_FULLSTOP_LEDGER_CLOSED'` */
  readonly code: string = ErrorCodes.ledgerClosed;
}

/** `runner.shutdown()` was called: `run` starts no turn from then on. */
export class ShuttingDownError extends Error {
  override readonly name: string = 'ShuttingDownError';
  /** `'ERR_FULLSTOP_SHUTTING_DOWN'` */
  readonly code: string = ErrorCodes.shuttingDown;
}

/**
 * A ledger store did not answer within its bound: a stop's intent past the store's
 * `intentTimeoutMs` (the stop signalled anyway), or a store's own `timeoutMs`.
 */
export class LedgerTimeoutError extends Error {
  override readonly name: string = 'LedgerTimeoutError';
  /** `'ERR_FULLSTOP_LEDGER_TIMEOUT'` */
  readonly code: string = ErrorCodes.ledgerTimeout;
}

/**
 * A short rendering of a bad value for an error message. Never throws: a Proxy or an object with
 * a throwing getter is still described, so a refused argument always gets its TypeError.
 * Not exported from a package entry.
 */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === 'function') return 'a function';
  if (value === null) return 'null';
  if (typeof value === 'object') return isArray(value) ? 'an array' : `an object (${constructorName(value)})`;
  if (typeof value === 'bigint') return `${value}n`;
  return String(value); // number, boolean, undefined, symbol: String() renders each of them
}

/**
 * Text for a value a caller gave as a cancel reason (or threw): the value itself is kept as
 * given wherever it is stored (`token.reason`, `CancelledError.reason`); this is only what goes
 * into a message, a ledger line or a log. Never throws, whatever the value: `String()` throws for
 * `Object.create(null)`, for an object whose `toString` throws or returns an object, and inside a
 * template literal for a Symbol, and a throw there would break a cancel half-way (the token
 * marked cancelled, its signal never aborted).
 *
 * @example
 * renderReason('cancel.user')            // 'cancel.user'
 * renderReason(new Error('quota'))       // 'Error: quota'
 * renderReason(Object.create(null))      // '[object (null prototype)]'
 */
export function renderReason(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return String(value);
  } catch {
    return typeof value === 'object' && value !== null ? `[object ${constructorName(value)}]` : `[${typeof value}]`;
  }
}

/** `Array.isArray`, which throws for a revoked Proxy: that is not an array. */
function isArray(value: object): boolean {
  try {
    return Array.isArray(value);
  } catch {
    return false;
  }
}

/** The class name of `value` without running any of its code that may throw (getters, Proxy traps). */
function constructorName(value: object): string {
  try {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === null) return '(null prototype)';
    const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value as unknown;
    const name = typeof ctor === 'function' ? Object.getOwnPropertyDescriptor(ctor, 'name')?.value : undefined;
    return typeof name === 'string' && name.length > 0 ? name : 'Object';
  } catch {
    return 'Proxy';
  }
}

/**
 * `name` must be an id: a non-empty string of at most `MAX_ID_LENGTH` characters (a TypeError, or
 * a RangeError naming the argument and its length), checked before anything is kept.
 */
export function checkId(name: string, value: unknown): asserts value is string {
  checkText(name, value);
  if (value.length > MAX_ID_LENGTH) {
    throw new RangeError(`${name}: at most ${MAX_ID_LENGTH} characters, got ${value.length}`);
  }
}

/** `name` must be a non-empty string (a path, say: no length bound of ours). */
export function checkText(name: string, value: unknown): asserts value is string {
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

/** `name` must be a function. */
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
