/**
 * What a turn's body is given: the `Turn` members only, so nothing else of the runner's own turn
 * object is reachable from it.
 */

import type { CancelToken } from '../token/token.js';
import type { ToolCall, ToolOptions, Turn } from './turn.js';

/** A `Turn` whose every member calls into `turn`, and that has no other. */
export function facadeOf(turn: Turn): Turn {
  return Object.freeze({
    token: turn.token,
    turnId: turn.turnId,
    get signal(): AbortSignal { return turn.token.signal; },
    tool: <R>(name: string, args: unknown, fn: (token: CancelToken, call: ToolCall) => Promise<R>, options?: ToolOptions): Promise<R> =>
      turn.tool(name, args, fn, options),
    ask: (question: unknown): Promise<unknown> => turn.ask(question),
    say: (text: string): Promise<void> => turn.say(text),
  });
}
