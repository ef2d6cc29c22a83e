/**
 * `fullstop`: stop an agent turn everywhere at once. See README.md and docs/design.md.
 */

export { CancelToken } from './token/token.js';
export { TurnRegistry, turns, type TurnRegistryOptions, type RegistryStats } from './token/registry.js';
export { runInTurn, runInSession, activeToken, checkCancelled } from './token/context.js';
export {
  CancelledError, isCancelledError, ToolError, FatalToolError, type CancelledErrorOptions,
} from './errors.js';
export type { TokenHandle } from './token/slot.js';
export { TurnPool, type TurnPoolOptions, type TurnPoolRunOptions, type TurnPoolStats } from './pool/pool.js';
/** Piscina's named exports, where a caller moving from `piscina` to `TurnPool` imports them. */
export {
  move, isWorkerThread, workerData, transferableSymbol, valueSymbol, queueOptionsSymbol, FixedQueue, ArrayTaskQueue,
  type TaskQueue, type PiscinaTask,
} from 'piscina';
export { TurnRunner, LISTENER_WARNING, type TurnRunnerOptions, type RunOptions } from './turn/runner.js';
export type { Turn } from './turn/active-turn.js';
export type { StopReport, TurnOutcome, TurnOutcomeStatus } from './turn/report.js';
export {
  Ledger, abortedToolText, TURN_ABORTED_MARKER, INTERRUPTED_TOOL_TEXT, TERMINAL_STATUSES, isTerminalStatus,
  type LedgerEntry, type LedgerEntryInput, type LedgerFilter, type TurnStatus,
} from './turn/ledger.js';
export {
  exec, spawnBackground, killAllBackground, execContainment,
  type ExecOptions, type ExecResult, type BackgroundProcess, type Containment, type OutputError,
} from './exec/index.js';
