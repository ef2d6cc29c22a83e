/**
 * `toModelMessages(entries)`: a session's ledger history as the AI SDK's `ModelMessage[]`, shaped
 * so the request after a stop is accepted (every tool call answered by exactly one result).
 *
 * The message types below are the subset of the AI SDK's `ModelMessage` (ai 5 and later) this
 * produces, declared here so the module needs nothing of `ai` at run time or in its types; each is
 * assignable to the SDK's own.
 */

import { DEFAULT_PARTIAL_BUDGET_BYTES } from '../constants.js';
import { describe } from '../errors.js';
import { INTERRUPTED_TOOL_TEXT } from '../ledger/entry.js';
import type { LedgerEntry } from '../ledger/entry.js';
import { cutAround, headAndTail, splitAtOmitted } from '../base/head-tail.js';
import { partialText } from './partial.js';

/** A JSON value, as the SDK's `JSONValue`. */
export type JsonValue = null | string | number | boolean | JsonValue[] | { [key: string]: JsonValue };

/** The user's message of a turn (`run(..., { input })`), or a stopped turn's marker. */
export interface UserModelMessage { role: 'user'; content: string }
/** A text part of an assistant message. */
export interface TextPart { type: 'text'; text: string }
/** A tool call the model made. */
export interface ToolCallPart { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }
/** What a turn said and the tools it called, one model step. */
export interface AssistantModelMessage { role: 'assistant'; content: Array<TextPart | ToolCallPart> }
/** The result of one tool call: its output, or an error text (a failure, a stop, an interruption). */
export interface ToolResultPart {
  type: 'tool-result'; toolCallId: string; toolName: string;
  output: { type: 'text'; value: string } | { type: 'json'; value: JsonValue } | { type: 'error-text'; value: string };
}
/** The results of one step's tool calls, in the order they were called. */
export interface ToolModelMessage { role: 'tool'; content: ToolResultPart[] }
/** One message of the array `toModelMessages` returns; assignable to the AI SDK's `ModelMessage`. */
export type ModelMessage = UserModelMessage | AssistantModelMessage | ToolModelMessage;

/** The options of `toModelMessages`. */
export interface ToModelMessagesOptions {
  /**
   * How much of a cut call's output (its `tool_aborted` entry's `partial`) follows its aborted
   * text, in bytes of UTF-8: more is given as its head and its tail with the omitted count between.
   * @default 4096
   */
  partialBudgetBytes?: number;
}

/** The text that introduces a cut call's output after its aborted text. */
export const PARTIAL_OUTPUT_HEADING = 'Its output before the stop:';

interface Call { readonly id: string; readonly callId: string; readonly name: string; readonly args: unknown }
type Output = ToolResultPart['output'];

/**
 * The ledger entries of a session (any number of turns, in ledger order) as model messages:
 * - each turn's `input` (from `turn_started`) as a `user` message: a string as it is, any other
 *   JSON value as its JSON text;
 * - its `say` texts, concatenated as they were streamed, as assistant text; a `say` after the
 *   step's tool calls begins the next step;
 * - every `tool_call` as a tool-call part, answered in a `tool` message right after its step by
 *   exactly one tool-result: its output (`text` for a string, else `json`), a failed output or a
 *   `tool_aborted` text as `error-text`, and `INTERRUPTED_TOOL_TEXT` for a call with neither (a
 *   turn still running, or a ledger not yet repaired by `Ledger.open`); a cut call's text is
 *   followed by what it had produced before the stop (its `partial`), head and tail within
 *   `partialBudgetBytes`;
 * - each `turn_aborted` marker as a `user` message right after the stopped turn.
 * Tool-call ids are the ledger's `callId` (the model's own id where `aiTools` recorded one); an id
 * already used earlier in the array (the default `call-N` repeats across turns) gets the turn's
 * position as a suffix, and an entry without one gets `call` with a suffix, so every tool-call
 * part has an id and every id is unique within the array. `status` entries add nothing.
 *
 * @param options.partialBudgetBytes how much of a cut call's output the model sees. @default 4096
 * @throws TypeError naming `entries` (or the entry) when it is not an array of ledger entries;
 *   TypeError or RangeError naming `options.partialBudgetBytes` for a bad one.
 * @example
 * // Inside a turn run with { input: text }: the entries already end with that input.
 * streamText({ model, abortSignal: turn.signal, messages: toModelMessages(await ledger.entries({ sessionId })) });
 */
export function toModelMessages(entries: readonly LedgerEntry[], options: ToModelMessagesOptions = {}): ModelMessage[] {
  if (!Array.isArray(entries)) throw new TypeError(`entries: expected an array of ledger entries, got ${describe(entries)}`);
  entries.forEach(checkEntry);
  if (options === null || typeof options !== 'object') throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { partialBudgetBytes = DEFAULT_PARTIAL_BUDGET_BYTES } = options;
  if (typeof partialBudgetBytes !== 'number') {
    throw new TypeError(`options.partialBudgetBytes: expected a number of bytes, got ${describe(partialBudgetBytes)}`);
  }
  if (!Number.isSafeInteger(partialBudgetBytes) || partialBudgetBytes < 0) {
    throw new RangeError(`options.partialBudgetBytes: expected a whole number of bytes, 0 or more, got ${describe(partialBudgetBytes)}`);
  }
  const results = resultsByCall(entries, partialBudgetBytes);
  const out: ModelMessage[] = [];
  const usedIds = new Set<string>();
  let turnId: string | undefined;
  let turnIndex = 0;
  let text = '';
  let calls: Call[] = [];

  // Ends the current step: its assistant message, then exactly one result for each of its calls.
  const endStep = () => {
    const content: Array<TextPart | ToolCallPart> = [];
    if (text !== '') content.push({ type: 'text', text });
    for (const c of calls) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.args });
    if (content.length > 0) out.push({ role: 'assistant', content });
    if (calls.length > 0) {
      out.push({
        role: 'tool',
        content: calls.map((c) => ({
          type: 'tool-result', toolCallId: c.id, toolName: c.name,
          output: results.get(callKey(turnId!, c.callId)) ?? { type: 'error-text', value: INTERRUPTED_TOOL_TEXT },
        })),
      });
    }
    text = '';
    calls = [];
  };

  for (const entry of entries) {
    if (entry.turnId !== turnId) {
      endStep();
      turnId = entry.turnId;
      turnIndex++;
    }
    switch (entry.type) {
      case 'turn_started': {
        const input = (entry as { input?: unknown }).input;
        if (input !== undefined) out.push({ role: 'user', content: typeof input === 'string' ? input : JSON.stringify(input) });
        break;
      }
      case 'say':
        if (calls.length > 0) endStep();
        text += entry.text;
        break;
      case 'tool_call': {
        // An entry without a callId (a hand-written or foreign ledger) still needs an id.
        const given = typeof entry.callId === 'string' && entry.callId !== '' ? entry.callId : undefined;
        let id = given;
        for (let n = turnIndex; id === undefined || usedIds.has(id); n++) id = `${given ?? 'call'}-t${n}`;
        usedIds.add(id);
        calls.push({ id, callId: entry.callId, name: entry.name, args: entry.args ?? null });
        break;
      }
      case 'turn_aborted':
        endStep();
        out.push({ role: 'user', content: entry.text });
        break;
      default:
        break; // tool_output/tool_aborted are read through `results`; status adds nothing
    }
  }
  endStep();
  return out;
}

/** Each call's one result, keyed by turn and call: the first output or aborted text recorded wins. */
function resultsByCall(entries: readonly LedgerEntry[], partialBudgetBytes: number): Map<string, Output> {
  const results = new Map<string, Output>();
  for (const entry of entries) {
    let output: Output;
    if (entry.type === 'tool_output') output = outputOf(entry.output, entry.success);
    else if (entry.type === 'tool_aborted') output = { type: 'error-text', value: abortedText(entry.output, entry.partial, partialBudgetBytes) };
    else continue;
    const k = callKey(entry.turnId, entry.callId);
    if (!results.has(k)) results.set(k, output);
  }
  return results;
}

/** A cut call's aborted text, then what it had produced before the stop (within the budget). */
function abortedText(text: string, partial: unknown, budgetBytes: number): string {
  const produced = partialText(partial);
  if (produced === undefined || budgetBytes === 0) return text;
  return `${text}\n\n${PARTIAL_OUTPUT_HEADING}\n${cutPartial(produced, partial, budgetBytes)}`;
}

/**
 * `produced` within the budget. A partial the runner already cut (its `omittedBytes`) is cut
 * around its omitted-bytes line, so the count the model reads is of the call's whole output, not
 * of the text the ledger kept.
 */
function cutPartial(produced: string, partial: unknown, budgetBytes: number): string {
  const omitted = (partial as { omittedBytes?: unknown } | null)?.omittedBytes;
  const parts = typeof omitted === 'number' && Number.isSafeInteger(omitted) && omitted > 0 ? splitAtOmitted(produced, omitted) : undefined;
  return parts === undefined ? headAndTail(produced, budgetBytes) : cutAround(parts.head, omitted as number, parts.tail, budgetBytes).text;
}

function outputOf(output: unknown, success: boolean): Output {
  if (!success) return { type: 'error-text', value: typeof output === 'string' ? output : JSON.stringify(output ?? null) };
  return typeof output === 'string' ? { type: 'text', value: output } : { type: 'json', value: (output ?? null) as JsonValue };
}

function callKey(turnId: string, callId: string): string {
  return `${turnId}\n${callId}`;
}

function checkEntry(entry: unknown, index: number): void {
  const e = entry as Partial<LedgerEntry> | null;
  if (e === null || typeof e !== 'object' || typeof e.type !== 'string' || typeof e.turnId !== 'string') {
    throw new TypeError(`entries[${index}]: expected a ledger entry (an object with type and turnId), got ${describe(entry)}`);
  }
}
