/**
 * The events of a `TurnRunner`, by name, with their payloads: `runner.on(name, listener)` is
 * type-checked against this map (an unknown name or a wrong payload does not compile).
 */

import type { StopReport } from './report.js';
import type { StopRefusal } from './pending-stops.js';

/** Every event's payload names its turn. (A type, not an interface, so a payload is a `Record<string, unknown>` too.) */
export type TurnEvent = {
  sessionId: string;
  turnId: string;
};

/** The events a `TurnRunner` emits, in the order a turn emits them. */
export interface TurnRunnerEvents {
  /** The turn began (`turn_started` is recorded); `input` is `run`'s, when given. */
  turn_started: [TurnEvent & { input?: unknown }];
  /** A tool call starts: its `tool_call` entry is recorded and its function is about to run. */
  tool_call: [TurnEvent & { callId: string; name: string; args: unknown }];
  /**
   * A tool call reported output as it happened (`call.progress(data)`); not written to the ledger
   * (a stop records the call's latest output on its `tool_aborted` entry). `data` is the value given.
   */
  tool_progress: [TurnEvent & { callId: string; name: string; data: unknown }];
  /** A tool call finished before any stop (its `tool_output` is recorded). */
  tool_output: [TurnEvent & { callId: string; name: string; output: unknown; success: boolean }];
  /** Streamed output (`turn.say`) is recorded. */
  say: [TurnEvent & { text: string }];
  /** `turn.ask`: answer it with `runner.answer(questionId, answer)`. */
  question: [TurnEvent & { questionId: string; question: unknown }];
  /** The body returned; the session is free for its next turn. */
  turn_completed: [TurnEvent & { value: unknown }];
  /** The body threw (or a tool threw `FatalToolError`); the session is free for its next turn. */
  turn_failed: [TurnEvent & { error: unknown }];
  /**
   * A stop ended the turn; its history is flushed and the session is free for its next turn.
   * `reason` is the stop's (as `report.reason`), the one the history's texts follow; `detail`, as
   * `report.detail`, the text of a caller's signal's reason when its abort made the stop.
   */
  turn_aborted: [TurnEvent & { reason: string; detail?: string; report: StopReport }];
  /**
   * A stop for a turn that has not started (`stop`/`requestStop` with its `turnId`) is kept until
   * `expiresAt` (epoch ms); that turn's `run` will start nothing of its body. Not a turn's event:
   * the turn named has not begun (and may never).
   */
  stop_pending: [TurnEvent & { reason: string; graceMs: number; expiresAt: number }];
  /**
   * A stop for a turn that has not started could not be kept (`why`: `session_full`, `book_full`,
   * `disabled`): if that turn starts, it runs. No stop already kept was dropped for it.
   */
  stop_refused: [TurnEvent & { reason: string; why: StopRefusal }];
}

/** The name of a `TurnRunner` event. */
export type TurnRunnerEventName = keyof TurnRunnerEvents;
