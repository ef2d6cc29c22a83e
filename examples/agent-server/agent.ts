/**
 * One agent turn: the model streams a step (its tokens go out through `turn.say`), the tools it
 * asked for run, their results go back to it, until it answers without a tool call. Everything
 * runs on `turn.signal` and `turn.tool`, so a stop reaches the model stream, the worker, the
 * process tree and the question at once.
 */
import { FatalToolError, isCancelledError, type Turn, type TurnPool } from '../../src/index.js';
import type { Message, Model, ToolCall } from './model.js';
import { runTool } from './tools.js';

/** A model that keeps calling tools is cut off after this many steps. */
const MAX_STEPS = 16;

/** What the page sees of a tool call before it runs (the runner reports only its output). */
export type OnToolCall = (turnId: string, callId: string, call: ToolCall) => void;

/** The body of one turn for `runner.run` / `fleet.run`; resolves with the model's last reply. */
export function agentTurn(model: Model, pool: TurnPool, prompt: string, onToolCall: OnToolCall): (turn: Turn) => Promise<string> {
  return async (turn) => {
    const messages: Message[] = [{ role: 'user', content: prompt }];
    // The runner numbers a turn's calls call-1, call-2 … in call order; the tool_call events use
    // the same ids so the page can match each tool_output to its call.
    let calls = 0;
    for (let step = 0; step < MAX_STEPS; step++) {
      let text = '';
      const toolCalls: ToolCall[] = [];
      for await (const event of model.stream(messages, turn.signal)) {
        if (event.type === 'text') {
          text += event.text;
          await turn.say(event.text);
        } else {
          toolCalls.push(event.call);
        }
      }
      messages.push({ role: 'assistant', content: text, toolCalls });
      if (toolCalls.length === 0) return text;
      for (const call of toolCalls) {
        onToolCall(turn.turnId, `call-${++calls}`, call);
        messages.push({ role: 'tool', toolCallId: call.id, name: call.name, content: await toolResult(turn, pool, call) });
      }
    }
    throw new FatalToolError(`the model asked for tools ${MAX_STEPS} times in a row; the turn gives up`);
  };
}

/** A tool's result as the model reads it: its output, or the error it failed with (the turn goes on). */
async function toolResult(turn: Turn, pool: TurnPool, call: ToolCall): Promise<string> {
  try {
    return JSON.stringify(await runTool(turn, pool, call));
  } catch (error) {
    if (isCancelledError(error) || error instanceof FatalToolError) throw error;
    return JSON.stringify({ error: error instanceof Error ? error.message : String(error) });
  }
}
