/**
 * One agent turn, written with the AI SDK and `fullstop/ai-sdk`: the session's history from the
 * ledger (`toModelMessages`), which ends with this turn's input, goes to `streamText` with
 * `abortSignal: turn.signal`; its text deltas go out through `turn.say`, its tool calls run through
 * `aiTools(turn, …)`. A stop therefore reaches the model stream, the worker, the process tree and
 * the question at once, and the next turn's prompt is accepted after a stop (every tool call in
 * it has a result, the stop is said in words the model reads).
 */
import { stepCountIs, streamText } from 'ai';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { FatalToolError, type LedgerEntry, type LedgerStore, type Turn, type TurnPool } from '../../src/index.js';
import { aiTools, toModelMessages } from '../../src/ai-sdk/index.js';
import { agentTools, shellTool } from './tools.js';

/** A model that keeps calling tools is cut off after this many steps. */
const MAX_STEPS = 16;
/** The prompt holds the session's last this many turns (a model's context is finite). */
export const MAX_HISTORY_TURNS = 20;

const SYSTEM = 'You are the fullstop example agent. Use the tools when the user names them. Be brief.';

/** What a turn runs on. */
export interface AgentDeps {
  model: LanguageModelV3;
  pool: TurnPool;
  /** The session's earlier turns are read from here for the prompt (every instance's, with a shared store). */
  ledger: LedgerStore;
}

/** The body of one turn for `runner.run` / `fleet.run`; resolves with the model's last reply. */
export function agentTurn(deps: AgentDeps, sessionId: string): (turn: Turn) => Promise<string> {
  return async (turn) => {
    // The ledger already holds this turn's turn_started with its input: the messages end with it.
    const history = lastTurns(await deps.ledger.entries({ sessionId }), turn.turnId);
    const messages = toModelMessages(history);
    const result = streamText({
      model: deps.model,
      system: SYSTEM,
      messages,
      tools: agentToolSet(turn, deps.pool),
      abortSignal: turn.signal,
      stopWhen: stepCountIs(MAX_STEPS),
    });
    let text = ''; // the current step's text: the last step's is the turn's reply
    for await (const part of result.fullStream) {
      if (part.type === 'start-step') text = '';
      else if (part.type === 'text-delta') {
        text += part.text;
        await turn.say(part.text);
      } else if (part.type === 'tool-error' && part.error instanceof FatalToolError) throw part.error;
      else if (part.type === 'error') throw part.error;
    }
    // A stop ends the stream with its `abort` part: the turn is cancelled, not completed.
    turn.signal.throwIfAborted();
    if ((await result.finishReason) === 'tool-calls') {
      throw new FatalToolError(`the model asked for tools ${MAX_STEPS} times in a row; the turn gives up`);
    }
    return text;
  };
}

/** The entries of `current` and of the last `MAX_HISTORY_TURNS` turns before it. */
function lastTurns(entries: readonly LedgerEntry[], current: string): LedgerEntry[] {
  const kept = new Set<string>([current]);
  for (let i = entries.length - 1; i >= 0 && kept.size <= MAX_HISTORY_TURNS + 1; i--) kept.add(entries[i].turnId);
  if (kept.size > MAX_HISTORY_TURNS + 1) kept.delete([...kept].at(-1)!);
  return entries.filter((e) => kept.has(e.turnId));
}

/**
 * The tools in the order the model is told of them: `crunch` and `ask` through `aiTools`, `shell`
 * with its own `turn.tool` call (its output reported with `call.progress`).
 */
function agentToolSet(turn: Turn, pool: TurnPool) {
  const { crunch, ask } = aiTools(turn, agentTools(turn, pool));
  return { crunch, shell: shellTool(turn), ask };
}
