// Runs on both threads: main and workers. It uses nothing but the language, so a worker can load it.
/**
 * The values more than one module agrees on: defaults, stop reasons, turn statuses and error codes.
 * Each is stated once here; a module that needs one imports it instead of restating it.
 */

/** The grace a stop gives a turn's work to settle before the hard stop, in ms (runner, pool, exec). */
export const DEFAULT_GRACE_MS = 100;

/** How long a stop of a turn that has not started yet waits for it (`TurnRunner` `pendingStopMs`), in ms. */
export const DEFAULT_PENDING_STOP_MS = 60_000;

/** How long `runner.shutdown()` waits for the stops it began before it resolves, in ms. */
export const DEFAULT_SHUTDOWN_DEADLINE_MS = 10_000;

/**
 * The longest id fullstop keeps, in characters: a session, turn, call or question id, a stop's
 * reason, a fleet's node id or prefix. A longer one is refused with a RangeError naming the
 * argument, before anything is kept (a hostile caller cannot make a stop cost a megabyte).
 */
export const MAX_ID_LENGTH = 1024;

/**
 * The longest line a ledger holds, in bytes (128 MiB): an append whose line is longer is refused
 * with a RangeError, and `Ledger.open` refuses a file holding one (naming the path and the line)
 * instead of building a string the runtime cannot hold.
 */
export const LEDGER_MAX_LINE_BYTES = 128 * 1024 * 1024;

/**
 * How long `ledger.close()` waits for the stops under way (their `cancelling` written, their end
 * not yet) to write and flush their history before it closes anyway, in ms (`Ledger.open`'s
 * `closeWaitMs`).
 */
export const DEFAULT_LEDGER_CLOSE_WAIT_MS = 10_000;

/**
 * Reason codes by intent, for `runner.stop(sessionId, { reason })` and the ledger's `status`
 * entries. A reason is any non-empty string; these are the ones fullstop itself gives.
 *
 * @example
 * await runner.stop(sessionId, { reason: StopReasons.client });
 */
export const StopReasons = Object.freeze({
  /** A user pressed Stop (the default of `stop`). */
  user: 'cancel.user',
  /** The client cancelled its own request (MCP `notifications/cancelled`). */
  client: 'cancel.client',
  /** The client went away (its connection or transport closed). */
  disconnect: 'cancel.disconnect',
  /** The server is shutting down (`runner.shutdown()`). */
  shutdown: 'cancel.shutdown',
  /** A deadline ran out. */
  timeout: 'cancel.timeout',
} as const);

/** One of `StopReasons`' values. */
export type StopReason = (typeof StopReasons)[keyof typeof StopReasons];

/** Every status a turn can have, in the order a turn moves through them. */
export const TURN_STATUSES = ['queued', 'running', 'cancelling', 'completed', 'failed', 'cancelled', 'interrupted'] as const;

/**
 * The statuses that end a turn. They are immutable: once one is recorded, nothing more of the turn
 * is written. `interrupted` means the turn was lost with no recorded intent (a crash, a restart).
 */
export const TERMINAL_STATUSES = ['completed', 'failed', 'cancelled', 'interrupted'] as const;

/**
 * The `code` of each error class fullstop throws, stable across versions: test `error.code`, not
 * the message.
 */
export const ErrorCodes = Object.freeze({
  /** `CancelledError`: the work was stopped by a cancel. */
  cancelled: 'ERR_FULLSTOP_CANCELLED',
  /** `ToolError`: a tool call could not be made; the turn goes on. */
  tool: 'ERR_FULLSTOP_TOOL',
  /** `FatalToolError`: a tool ended the turn `failed`. */
  fatalTool: 'ERR_FULLSTOP_FATAL_TOOL',
  /** `SessionBusyError`: the session already has a running turn. */
  sessionBusy: 'ERR_FULLSTOP_SESSION_BUSY',
  /** `TurnIdUsedError`: the turn id was used before (running, or in the ledger). */
  turnIdUsed: 'ERR_FULLSTOP_TURN_ID_USED',
  /** `ShuttingDownError`: the runner is shutting down and starts no turn. */
  shuttingDown: 'ERR_FULLSTOP_SHUTTING_DOWN',
  /** `LedgerTimeoutError`: a ledger store did not answer within its bound (a stop went on without it). */
  ledgerTimeout: 'ERR_FULLSTOP_LEDGER_TIMEOUT',
  /** `FleetUnavailableError` (`fullstop/fleet`): Redis could not be reached in time. */
  fleetUnavailable: 'ERR_FULLSTOP_FLEET_UNAVAILABLE',
  /** `UsageError` (the `fullstop` CLI): bad command-line input. */
  usage: 'ERR_FULLSTOP_USAGE',
} as const);
