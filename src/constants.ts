// Runs on both threads: main and workers. It uses nothing but the language, so a worker can load it.
/**
 * The values more than one module agrees on: defaults, stop reasons, turn statuses and error codes.
 * Each is stated once here; a module that needs one imports it instead of restating it.
 */

/** The grace a stop gives a turn's work to settle before the hard stop, in ms (runner, pool, exec). */
export const DEFAULT_GRACE_MS = 100;

/** How long a stop of a turn that has not started yet waits for it (`TurnRunner` `pendingStopMs`), in ms. */
export const DEFAULT_PENDING_STOP_MS = 60_000;

/**
 * The most pending stops (stops sent to a turn that has not started) a `TurnRunner` keeps for one
 * session. Past it a new one is refused (`stop_refused`, why `session_full`), never another dropped.
 */
export const MAX_PENDING_STOPS_PER_SESSION = 100;

/**
 * The most pending stops a `TurnRunner` keeps in all. Past it a new one is refused (`stop_refused`,
 * why `book_full`): one client's flood can fill the book, but never erase a stop already kept.
 */
export const MAX_PENDING_STOPS = 10_000;

/**
 * How many ended turns a `TurnRunner` remembers the status of, the newest kept, so a stop naming
 * one answers `already_finished` with its `status` (older ones: without it, when its store holds it).
 */
export const MAX_ENDED_TURNS_KEPT = 1_000;

/** The `node` of an answer a `TurnRunner` took when no fleet names it (`AnswerReply`). */
export const LOCAL_NODE_ID = 'local';

/**
 * The most UTF-8 bytes of a tool's output the history records (`TurnRunner` `maxOutputBytes`);
 * a larger one is recorded as its head and tail around a `… N bytes omitted …` line.
 */
export const DEFAULT_MAX_OUTPUT_BYTES = 1_048_576;

/**
 * The most UTF-8 bytes of a tool call's progress text (`call.progress`) the runner keeps for its
 * `tool_aborted` entry: the first quarter and the latest three quarters, with the count between.
 */
export const MAX_PROGRESS_BYTES = 65_536;

/** How long `runner.shutdown()` waits for the stops it began before it resolves, in ms. */
export const DEFAULT_SHUTDOWN_DEADLINE_MS = 10_000;

/** How often `fullstop/mcp` sends a running call's progress notification (`progressIntervalMs`), in ms. */
export const DEFAULT_MCP_PROGRESS_INTERVAL_MS = 10_000;

/**
 * The most UTF-8 bytes of JSON one `fleet.answer` sends through Redis (`FleetOptions`
 * `maxAnswerBytes`): Redis runs each of an answer's scripts whole, and the owner reads the answer
 * on the connection its lease renewals use.
 */
export const DEFAULT_MAX_ANSWER_BYTES = 1_048_576;

/** How much of a cut call's output `toModelMessages` gives the model (`partialBudgetBytes`), in bytes. */
export const DEFAULT_PARTIAL_BUDGET_BYTES = 4096;

/**
 * The longest id fullstop keeps, in characters: a session, turn, call or question id, a stop's
 * reason, a fleet's node id or prefix. A longer one is refused with a RangeError naming the
 * argument, before anything is kept (a hostile caller cannot make a stop cost a megabyte).
 */
export const MAX_ID_LENGTH = 1024;

/**
 * The longest `detail` a stop keeps, in characters (UTF-16 code units, as `MAX_ID_LENGTH`): the text
 * of the reason of a caller's signal (`run`'s `signal`: Hono's "Client connection prematurely
 * closed.", an Error's message). A longer one is kept as its first characters and `…`.
 */
export const MAX_STOP_DETAIL_LENGTH = 1024;

/**
 * `exec`: the most of each stream (stdout, stderr) a result keeps (`ExecOptions` `maxBuffer`), in
 * UTF-8 bytes; past it the stream's head and tail around a `… N bytes omitted …` line.
 */
export const DEFAULT_EXEC_MAX_BUFFER = 100_000_000;

/** `fullstop/fleet`: the prefix of every key and channel (`FleetOptions` `prefix`). */
export const DEFAULT_FLEET_PREFIX = 'fullstop';

/** `fullstop/fleet`: how long a turn stays owned without a renewal (`FleetOptions` `leaseMs`), in ms. */
export const DEFAULT_FLEET_LEASE_MS = 15_000;

/** `fullstop/fleet`: how long a finished turn's record answers `already_finished` (`finishedTtlMs`), in ms (24 h). */
export const DEFAULT_FLEET_FINISHED_TTL_MS = 24 * 60 * 60 * 1000;

/** `fullstop/fleet`: the longest wait for a Redis reply when registering or recording a turn (`commandTimeoutMs`), in ms. */
export const DEFAULT_FLEET_COMMAND_TIMEOUT_MS = 2_000;

/** `fullstop/fleet`: the bound of a whole `fleet.stop` or `fleet.answer` call (their `timeoutMs`), in ms. */
export const DEFAULT_FLEET_CALL_TIMEOUT_MS = 2_000;

/**
 * `fullstop/fleet`: the most pending stops Redis keeps for one session (`FleetOptions`
 * `maxPendingStops`); the runner's own bound is `MAX_PENDING_STOPS_PER_SESSION`.
 */
export const DEFAULT_FLEET_MAX_PENDING_STOPS = 100;

/** `fullstop/bullmq`: how long a job that could not start a turn now waits (delayed, no attempt counted), in ms. */
export const DEFAULT_BULLMQ_REQUEUE_DELAY_MS = 1000;

/** `fullstop/bullmq`: the least time between two `job.updateProgress` calls of a job, in ms. */
export const DEFAULT_BULLMQ_PROGRESS_INTERVAL_MS = 250;

/** `fullstop/bullmq`: the most UTF-8 bytes of text one job progress carries. */
export const DEFAULT_BULLMQ_PROGRESS_MAX_BYTES = 4096;

/** `fullstop/postgres`: the schema `PgLedger.open` keeps its tables in when none is given. */
export const DEFAULT_PG_SCHEMA = 'fullstop';

/** `fullstop/postgres`: the bound of every wait on the database (`PgLedger.open` `timeoutMs`), in ms. */
export const DEFAULT_PG_TIMEOUT_MS = 5_000;

/** `fullstop/postgres`: how long a stop's signal waits for its intent's commit (`intentTimeoutMs`), in ms. */
export const DEFAULT_PG_INTENT_TIMEOUT_MS = 1_000;

/**
 * The `type` of the warnings a throwing user callback raises (`process.on('warning')`): a
 * `TurnRunner` event listener, an `exec` `onOutput`. The work it was called from goes on.
 */
export const LISTENER_WARNING = 'FullstopListenerWarning';

/**
 * The `type` of the warning a fleet sweep raises when closing a dead owner's turn in the shared
 * history (`closeAbandonedTurn`) fails (`process.on('warning')`). The sweep goes on.
 */
export const SWEEP_LEDGER_WARNING = 'FullstopFleetSweepWarning';

/**
 * The longest line a ledger holds, in bytes (128 MiB): an append whose line is longer is refused
 * with a RangeError, and `Ledger.open` refuses a file holding one (naming the path and the line)
 * instead of building a string the runtime cannot hold.
 */
export const LEDGER_MAX_LINE_BYTES = 128 * 1024 * 1024;

/**
 * How long `ledger.close()` waits for the stops under way (their `cancelling` written, their end
 * not yet) to write and flush their history before it closes anyway, in ms (`Ledger.open`'s and
 * `PgLedger.open`'s `closeWaitMs`).
 */
export const DEFAULT_LEDGER_CLOSE_WAIT_MS = 10_000;

/**
 * The file `Ledger`: how long a stop's signal waits for its intent's sync (`Ledger.open`'s
 * `intentTimeoutMs`), in ms. Past it the stop signals anyway, its report's `ledgerError` saying so.
 */
export const DEFAULT_LEDGER_INTENT_TIMEOUT_MS = 5_000;

/**
 * The file `Ledger`: the bound of a `flush()`'s wait for the disk, and of `close()`'s wait for the
 * syncs under way (`Ledger.open`'s `timeoutMs`), in ms.
 */
export const DEFAULT_LEDGER_TIMEOUT_MS = 10_000;

/**
 * The file `Ledger`: how long its lock file may go unrefreshed before another host may take it
 * over, in ms (`Ledger.open`'s `lockStaleMs`); the holder refreshes it every third of that.
 */
export const DEFAULT_LEDGER_LOCK_STALE_MS = 30_000;

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

/**
 * Reason codes fullstop writes itself when no one asked for a stop: a fleet's lease (a turn whose
 * owner lost or let its lease run out), a fleet closing, and a restart (a turn the host lost with no
 * recorded stop, closed by `Ledger.open`'s repair or a fleet's sweep).
 */
export const FleetReasons = Object.freeze({
  /** The instance running the turn could not renew its lease in time and stopped its own turn. */
  leaseLost: 'lease.lost',
  /** The turn's lease expired (its instance went silent); another instance closed its record. */
  leaseExpired: 'lease.expired',
  /** `fleet.close()` ended the turn's record while the turn was still running. */
  closed: 'fleet.closed',
  /** The host stopped (a crash, a restart) with the turn open and no stop recorded. */
  restart: 'restart',
} as const);

/** One of `FleetReasons`' values. */
export type FleetReason = (typeof FleetReasons)[keyof typeof FleetReasons];

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
  /** `TurnEndedError`: a store refused an entry of a turn whose terminal status it holds. */
  turnEnded: 'ERR_FULLSTOP_TURN_ENDED',
  /** `LedgerClosedError`: a store refused a call after `close()`. */
  ledgerClosed: 'ERR_FULLSTOP_LEDGER_CLOSED',
  /** `FleetUnavailableError` (`fullstop/fleet`): Redis could not be reached in time. */
  fleetUnavailable: 'ERR_FULLSTOP_FLEET_UNAVAILABLE',
  /** `FleetClosedError` (`fullstop/fleet`): `fleet.run` after `fleet.close()`. */
  fleetClosed: 'ERR_FULLSTOP_FLEET_CLOSED',
  /** `UsageError` (the `fullstop` CLI): bad command-line input. */
  usage: 'ERR_FULLSTOP_USAGE',
} as const);
