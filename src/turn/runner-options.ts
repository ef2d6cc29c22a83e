/**
 * The checks of `TurnRunner`'s options (constructor, `run`, `stop`), once at the boundary. Each
 * option is read exactly once (a getter cannot answer one value to the check and another to the
 * runner), and a bad one is a TypeError or RangeError naming it, thrown before anything changes.
 */

import { DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_PENDING_STOP_MS, DEFAULT_SHUTDOWN_DEADLINE_MS, StopReasons } from '../constants.js';
import { checkId, checkMs, describe } from '../errors.js';
import { TurnPool } from '../pool/pool.js';
import { TurnRegistry, turns } from '../token/registry.js';
import { isLedgerStore, type LedgerStore } from '../ledger/store.js';
import { asJson } from '../base/json.js';

export interface TurnRunnerOptions {
  /** @default turns (the default registry) */
  registry?: TurnRegistry;
  /** The pool the turn's tools run on; kept as `runner.pool` for them. */
  pool?: TurnPool;
  /** Where history goes (any `LedgerStore`: the file `Ledger`, `PgLedger`, your own); without one, nothing is written (events still are). */
  ledger?: LedgerStore;
  /** Default grace of `stop()`, 0 to 2^31−1 ms. @default 100 */
  graceMs?: number;
  /**
   * How long a stop of a turn that has not started yet (`stop(sessionId, { turnId })` before
   * `run(sessionId, body, { turnId })`) is kept for it, 0 to 2^31−1 ms; 0 keeps none (such a stop is
   * refused: `requestStop` answers `refused`, why `disabled`). @default 60000
   */
  pendingStopMs?: number;
  /**
   * The most UTF-8 bytes of a tool output (or a cut call's `partial`, or a failed call's message)
   * the history records, 1,024 to 2^31−1. A larger one is recorded as its head and its tail around
   * a `… N bytes omitted …` line; the body and the `tool_output` event still get the whole value.
   * Whatever the bound, what is recorded fits one ledger line (`LEDGER_MAX_LINE_BYTES`, its JSON
   * escapes included): past that, it is cut further.
   * @default 1048576 (1 MiB)
   */
  maxOutputBytes?: number;
}

/** The smallest `maxOutputBytes`: room for a head, a tail and the omitted line between. */
const MIN_OUTPUT_BYTES = 1024;
const MAX_OUTPUT_BYTES = 2 ** 31 - 1;

/** `options` as an object with each named field read once; TypeError when it is not an object. */
function fields(where: string, options: unknown, names: readonly string[]): Record<string, unknown> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${where}: expected an object, got ${describe(options)}`);
  }
  const out: Record<string, unknown> = {};
  for (const name of names) out[name] = (options as Record<string, unknown>)[name];
  return out;
}

export function checkRunnerOptions(options: unknown): Required<Omit<TurnRunnerOptions, 'pool' | 'ledger'>> & Pick<TurnRunnerOptions, 'pool' | 'ledger'> {
  const {
    registry = turns, pool, ledger, graceMs = DEFAULT_GRACE_MS, pendingStopMs = DEFAULT_PENDING_STOP_MS, maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES,
  } = fields('options', options, ['registry', 'pool', 'ledger', 'graceMs', 'pendingStopMs', 'maxOutputBytes']);
  if (!(registry instanceof TurnRegistry)) throw new TypeError(`options.registry: expected a TurnRegistry, got ${describe(registry)}`);
  if (pool !== undefined && !(pool instanceof TurnPool)) throw new TypeError(`options.pool: expected a TurnPool, got ${describe(pool)}`);
  if (ledger !== undefined && !isLedgerStore(ledger)) {
    throw new TypeError(`options.ledger: expected a LedgerStore (append, flush, entries, hasTurn, close), got ${describe(ledger)}`);
  }
  checkMs('options.graceMs', graceMs);
  checkMs('options.pendingStopMs', pendingStopMs);
  if (typeof maxOutputBytes !== 'number') throw new TypeError(`options.maxOutputBytes: expected a number of bytes, got ${describe(maxOutputBytes)}`);
  if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < MIN_OUTPUT_BYTES || maxOutputBytes > MAX_OUTPUT_BYTES) {
    throw new RangeError(`options.maxOutputBytes: expected an integer from ${MIN_OUTPUT_BYTES} to ${MAX_OUTPUT_BYTES}, got ${describe(maxOutputBytes)}`);
  }
  return { registry, pool, ledger, graceMs: graceMs as number, pendingStopMs: pendingStopMs as number, maxOutputBytes };
}

/** What `TurnRunner.run` takes besides the session and the body. */
export interface RunOptions {
  /** The turn's id; must not be in the ledger yet. @default `turn-${randomUUID()}` */
  turnId?: string;
  /**
   * A caller's AbortSignal (an HTTP request's, a BullMQ job's, a parent task's): its abort is a stop
   * of this turn under the runner's grace, with reason `signalReason`, exactly as
   * `runner.stop(sessionId, { reason: signalReason })` would be (its `cancelling` intent durable
   * before the token trips). The signal's own reason — a framework's words, an Error, a
   * DOMException — is never taken for the stop's reason: its text is kept as the stop's `detail`
   * (`StopReport.detail`, the `turn_aborted` event, the `cancelling` entry). An already aborted
   * signal stops the turn before its body starts.
   */
  signal?: AbortSignal;
  /**
   * The reason code of the stop `signal`'s abort makes (a `StopReasons` value or your own code; a
   * non-empty string of at most 1,024 characters): the history's texts follow it, so only
   * `cancel.user` tells the model the user stopped the turn. Only with `signal`.
   * @default 'cancel.client' (`StopReasons.client`)
   * @example
   * // Hono: the client went away → 'cancel.disconnect', Hono's words as detail
   * runner.run(sessionId, body, { signal: c.req.raw.signal, signalReason: StopReasons.disconnect });
   */
  signalReason?: string;
  /**
   * The user's message that started the turn (JSON-encodable): recorded on `turn_started` as
   * `input` and passed to its event, so the history can be replayed to a model.
   */
  input?: unknown;
}

/** `RunOptions` checked; `signalReason` is set (its default) exactly when `signal` is. */
export function checkRunOptions(options: unknown): Omit<RunOptions, 'signalReason'> & { signalReason?: string } {
  const { turnId, signal, signalReason, input } = fields('options', options, ['turnId', 'signal', 'signalReason', 'input']);
  if (turnId !== undefined) checkId('options.turnId', turnId);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`options.signal: expected an AbortSignal, got ${describe(signal)}`);
  return { turnId, signal, ...checkSignalReason(signal, signalReason), input: input === undefined ? undefined : asJson('options.input', input) };
}

/**
 * `options.signalReason` checked against `signal`: an id (TypeError/RangeError naming it), and only
 * with a signal (a reason with nothing to abort is a mistake the caller should hear of).
 */
export function checkSignalReason(signal: AbortSignal | undefined, signalReason: unknown): { signalReason?: string } {
  if (signalReason === undefined) return signal === undefined ? {} : { signalReason: StopReasons.client };
  checkId('options.signalReason', signalReason);
  if (signal === undefined) throw new TypeError('options.signalReason: given without options.signal; it is the reason of the stop that signal\'s abort makes');
  return { signalReason };
}

/** What `TurnRunner.stop` takes besides the session. */
export interface StopOptions {
  /** The grace of this stop, 0 to 2^31−1 ms. @default the runner's `graceMs` */
  graceMs?: number;
  /** The reason code recorded and reported (see `StopReasons`). @default 'cancel.user' */
  reason?: string;
  /**
   * Stop this turn only. When it is the session's running turn, it is stopped; when it has not
   * started and is not in the ledger, the stop (with its `reason` and `graceMs`) is kept for it
   * (`pendingStopMs`, within the book's bounds) and its `run` starts nothing of the body; otherwise
   * (another session's, or already over) nothing happens. `requestStop` says which.
   */
  turnId?: string;
}

export function checkStopOptions(options: unknown): { graceMs?: number; reason: string; turnId?: string } {
  const { graceMs, reason = StopReasons.user, turnId } = fields('options', options, ['graceMs', 'reason', 'turnId']);
  checkMs('options.graceMs', graceMs);
  checkId('options.reason', reason);
  if (turnId !== undefined) checkId('options.turnId', turnId);
  return { graceMs, reason, turnId };
}

/** What `TurnRunner.shutdown` takes. */
export interface ShutdownOptions {
  /** How long to wait for the stops, 0 to 2^31−1 ms; then it resolves with the reports finished by then. @default 10000 */
  deadlineMs?: number;
  /** The reason code of every stop. @default 'cancel.shutdown' */
  reason?: string;
}

export function checkShutdownOptions(options: unknown): Required<ShutdownOptions> {
  const { deadlineMs = DEFAULT_SHUTDOWN_DEADLINE_MS, reason = StopReasons.shutdown } = fields('options', options, ['deadlineMs', 'reason']);
  checkMs('options.deadlineMs', deadlineMs);
  checkId('options.reason', reason);
  return { deadlineMs: deadlineMs as number, reason };
}
