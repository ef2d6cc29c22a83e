/**
 * `fullstop`: stop an agent turn everywhere at once. See README.md and docs/design.md.
 */

export { CancelToken } from './token/token.js';
export { TurnRegistry, turns, type TurnRegistryOptions, type RegistryStats } from './token/registry.js';
export { runInTurn, runInSession, activeToken, checkCancelled } from './token/context.js';
export {
  CancelledError, isCancelledError, ToolError, FatalToolError, SessionBusyError, TurnIdUsedError, ShuttingDownError, LedgerTimeoutError,
  TurnEndedError, LedgerClosedError,
  type CancelledErrorOptions,
} from './errors.js';
export {
  StopReasons, ErrorCodes, MAX_ID_LENGTH, MAX_STOP_DETAIL_LENGTH, DEFAULT_GRACE_MS, DEFAULT_PENDING_STOP_MS, DEFAULT_SHUTDOWN_DEADLINE_MS, type StopReason,
  FleetReasons, type FleetReason, MAX_PENDING_STOPS, MAX_PENDING_STOPS_PER_SESSION, DEFAULT_MAX_OUTPUT_BYTES, MAX_PROGRESS_BYTES,
  LEDGER_MAX_LINE_BYTES, DEFAULT_LEDGER_CLOSE_WAIT_MS, DEFAULT_LEDGER_INTENT_TIMEOUT_MS, DEFAULT_LEDGER_TIMEOUT_MS,
} from './constants.js';
export type { TokenHandle } from './token/slot.js';
export { TurnPool, type TurnPoolOptions, type TurnPoolRunOptions, type TurnPoolStats } from './pool/pool.js';
/** Piscina's named exports, where a caller moving from `piscina` to `TurnPool` imports them. */
export {
  move, isWorkerThread, workerData, transferableSymbol, valueSymbol, queueOptionsSymbol, FixedQueue, ArrayTaskQueue,
  type TaskQueue, type PiscinaTask,
} from 'piscina';
export {
  TurnRunner, LISTENER_WARNING, type TurnRunnerOptions, type RunOptions, type StopOptions, type ShutdownOptions,
  type StopRequest, type StopRefusal, type AnswerReply,
} from './turn/runner.js';
export type { TurnRunnerEvents, TurnRunnerEventName, TurnEvent } from './turn/runner-events.js';
export type { Turn, ToolOptions, ToolCall } from './turn/active-turn.js';
export type {
  StopReport, TurnOutcome, TurnOutcomeStatus, CompletedOutcome, FailedOutcome, CancelledOutcome,
} from './turn/report.js';
export {
  Ledger, abortedToolText, TURN_ABORTED_MARKER, INTERRUPTED_TOOL_TEXT, TERMINAL_STATUSES, isTerminalStatus,
  type LedgerEntry, type LedgerEntryInput, type TurnStatus, type LedgerOpenOptions, type LedgerRepair, type LedgerSegment,
} from './ledger/ledger.js';
export { turnAbortedMarker, stopCause } from './ledger/texts.js';
export type { LedgerStore, LedgerFilter } from './ledger/store.js';
export { ShardedLedger, type ShardedLedgerOptions } from './ledger/sharded.js';
export {
  exec, spawnBackground, killAllBackground, execContainment,
  type ExecOptions, type ExecResult, type BackgroundProcess, type Containment, type ContainmentOption, type OutputError, type OutputChunk, type OnOutput,
} from './exec/index.js';
export { RUNTIME_WARNING } from './base/refused.js';
