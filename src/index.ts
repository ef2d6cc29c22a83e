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
// Tuning defaults are not exported: each is the documented default of its option, and the object
// made with it reads it back (`runner.graceMs`, `ledger.timeoutMs`, …). The limits a caller's own
// input must keep within are.
export {
  StopReasons, ErrorCodes, FleetReasons, type StopReason, type FleetReason, MAX_ID_LENGTH, MAX_STOP_DETAIL_LENGTH, LEDGER_MAX_LINE_BYTES,
} from './constants.js';
export type { TokenHandle } from './token/slot.js';
export { TurnPool, type TurnPoolOptions, type TurnPoolRunOptions, type TurnPoolStats } from './pool/pool.js';
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
  type ExecOptions, type ExecResult, type BackgroundProcess, type Containment, type ContainmentOption, type OutputChunk, type OnOutput,
} from './exec/index.js';
export { RUNTIME_WARNING } from './base/refused.js';
