/**
 * What a turn's body sees: the `Turn` it is given, and the `ToolCall` each tool's function gets.
 * `ActiveTurn` (active-turn.ts) implements them; a body is given its `facade` (these members only).
 */

import type { CancelToken } from '../token/token.js';

/** What a turn's body gets. */
export interface Turn {
  readonly token: CancelToken;
  readonly signal: AbortSignal;
  readonly turnId: string;
  /**
   * Run a tool call: `tool_call` is written before `fn` runs with a child token (a tool timeout
   * cancels only that call). A value → `tool_output` success. A `ToolError` (or any other error)
   * → `tool_output` with `success: false` and the message; the call rejects, the turn goes on.
   * A `FatalToolError` ends the turn `failed`. A call that had not returned when a stop's signal
   * went out gets an aborted output (`tool_aborted`), even if it returns during the grace: what it
   * returned or threw then is kept on that entry as `partial`.
   * `args` and the value are recorded as JSON: args JSON cannot encode are a TypeError at the call
   * (nothing is recorded); a value JSON cannot encode is recorded as a failed output and the call
   * rejects with a TypeError. The `tool_call` event is emitted once the call is recorded.
   * An output larger than the runner's `maxOutputBytes` is recorded as its head and tail around a
   * `… N bytes omitted …` line; the call still resolves with the whole value.
   * `fn`'s second argument is the call (`ToolCall`): `call.progress(data)` reports its output as
   * it happens (the `tool_progress` event); a call a stop cuts records its progress so far.
   *
   * @example
   * await turn.tool('build', {}, (token, call) => exec('make', [], { token, onOutput: (c) => call.progress(c) }));
   */
  tool<R>(name: string, args: unknown, fn: (token: CancelToken, call: ToolCall) => Promise<R>, options?: ToolOptions): Promise<R>;
  /**
   * Emit `question`; resolves with `runner.answer(questionId, value)`; rejects with `CancelledError`
   * on a stop. A question still pending when its turn ends otherwise is withdrawn and never settles.
   */
  ask(question: unknown): Promise<unknown>;
  /** Streamed output: a `say` entry, kept on a stop. */
  say(text: string): Promise<void>;
}

/** What `Turn.tool` takes besides the call itself. */
export interface ToolOptions {
  /**
   * The call's id in the history (the model's own tool-call id, so the history matches the model's
   * calls). Unique within the turn: a repeat is a TypeError. @default `call-N`, N counting the turn's calls
   */
  callId?: string;
}

/**
 * A tool call, as its function sees it (the second argument of `turn.tool`'s `fn`).
 *
 * @example
 * turn.tool('build', {}, (token, call) => exec('make', [], { token, onOutput: (chunk) => call.progress(chunk) }));
 */
export interface ToolCall {
  /** The call's id in the history (`options.callId`, or `call-N`). */
  readonly callId: string;
  /** The tool's name, as given to `turn.tool`. */
  readonly name: string;
  /**
   * Report the call's output as it happens: emits `tool_progress` (`sessionId`, `turnId`, `callId`,
   * `name`, `data`); nothing is written to the ledger for it. The runner keeps the call's latest
   * output within `MAX_PROGRESS_BYTES` (text — a string, or `{ stream, text }` as `exec`'s
   * `onOutput` gives — as its head and latest tail; any other value, the latest), and a call a stop
   * cuts records it on its `tool_aborted` entry as `partial` (with `progress: true`) unless the call
   * returned a value itself. Progress after the call settled, or once the turn's stop began, is dropped.
   */
  progress(data: unknown): void;
}
