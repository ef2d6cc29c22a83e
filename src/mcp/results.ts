/**
 * What an MCP tool call answers, from how its turn ended (docs/design.md §8): a returned result
 * passes through, a `ToolError` and a stop become `isError` results the client can read, and
 * anything else is thrown for the SDK to report as it does without fullstop.
 */

import { ToolError } from '../errors.js';
import type { TurnOutcome } from '../turn/report.js';
import type { CallToolResult } from './types.js';

/** An `isError` result whose one text part is `text`. */
export function errorResult(text: string): CallToolResult & { isError: true } {
  return { isError: true, content: [{ type: 'text', text }] };
}

/** The body's own catch: a `ToolError` is an answer to the model, not a failure of the turn. */
export function toolErrorResult(error: unknown): CallToolResult {
  if (error instanceof ToolError) return errorResult(error.message);
  throw error;
}

/**
 * The answer for a turn's outcome: its value when completed, `stoppedText` when it was stopped;
 * a failed turn's error (a `FatalToolError` first, the body's error otherwise) is thrown.
 */
export function resultOf(outcome: TurnOutcome<CallToolResult>, stoppedText: () => string): CallToolResult {
  switch (outcome.status) {
    case 'completed': return outcome.value;
    case 'cancelled': return errorResult(stoppedText());
    default: throw outcome.error;
  }
}
