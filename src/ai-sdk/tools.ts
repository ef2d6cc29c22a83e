/**
 * `aiTools(turn, tools)`: an AI SDK tool set whose every `execute` runs as one tool call of a turn,
 * so the ledger records it under the model's own `toolCallId` and a stop of the turn reaches it.
 *
 * The AI SDK is not imported: a tool is any object, and only its `execute` is replaced (the
 * `execute(input, { toolCallId, abortSignal })` shape of ai 5 and later), so this works with every
 * major that keeps that shape and never loads the framework itself.
 */

import { checkId, describe } from '../errors.js';
import type { Turn } from '../turn/active-turn.js';
import type { CancelToken } from '../token/token.js';

/** What the AI SDK passes as `execute`'s second argument (the fields read here; others pass through). */
export interface ToolExecutionOptions {
  /** The model's id of this call; becomes the ledger's `callId`. */
  toolCallId: string;
  /** The SDK call's own `abortSignal`, when it was given one. */
  abortSignal?: AbortSignal;
  [key: string]: unknown;
}

/** A tool that `aiTools` wraps: anything with an `execute` (tools without one pass through unchanged). */
type Executable = { execute: (input: never, options: ToolExecutionOptions) => unknown };

/**
 * The same tools with each `execute(input, options)` run through
 * `turn.tool(name, input, fn, { callId: options.toolCallId })`:
 * - a `toolCallId` the model already used in this turn is recorded as `<id>-2` (then `-3`, …): the
 *   call still runs and is recorded, and the SDK still gets its result under the model's id;
 * - the call's child token is ambient inside `execute`, so `pool.run`/`exec` need no token argument;
 * - `options.abortSignal` is replaced by the call's token's signal, which aborts when the turn is
 *   stopped whether or not the SDK call was given an `abortSignal`; an `abortSignal` the SDK call
 *   was given cancels this call's token when it aborts, so the work inside stops too;
 * - an `execute` that is an `async function*` (the SDK's preliminary results) stays a generator:
 *   each value is passed on as it comes and the last one is recorded; any other `execute` that
 *   returns an async iterable is drained inside the call and its last value is the result.
 * Tools without `execute` (provider-executed or client-side tools) are returned as they are.
 *
 * @param turn the running turn (the body's argument of `runner.run`).
 * @param tools the `tools` object given to `streamText`/`generateText`.
 * @returns a new object with the same keys; the given one is not changed.
 * @throws TypeError naming `turn` or `tools` when either is not what it should be.
 * @example
 * await runner.run(sessionId, (turn) => {
 *   const result = streamText({ model, tools: aiTools(turn, { crunch }), abortSignal: turn.signal, prompt });
 *   return result.text;
 * });
 */
export function aiTools<T extends Record<string, object>>(turn: Turn, tools: T): T {
  if (typeof (turn as Partial<Turn> | null)?.tool !== 'function' || !((turn as Partial<Turn>).signal instanceof AbortSignal)) {
    throw new TypeError(`turn: expected the Turn a runner's body receives, got ${describe(turn)}`);
  }
  if (tools === null || typeof tools !== 'object' || Array.isArray(tools)) {
    throw new TypeError(`tools: expected an object of AI SDK tools, got ${describe(tools)}`);
  }
  const wrapped: Record<string, object> = {};
  for (const [name, tool] of Object.entries(tools)) {
    if (tool === null || typeof tool !== 'object') {
      throw new TypeError(`tools.${name}: expected an AI SDK tool (an object), got ${describe(tool)}`);
    }
    const execute = (tool as Partial<Executable>).execute;
    if (execute === undefined) wrapped[name] = tool;
    else if (typeof execute !== 'function') throw new TypeError(`tools.${name}.execute: expected a function, got ${describe(execute)}`);
    else wrapped[name] = { ...tool, execute: wrapExecute(turn, name, execute) };
  }
  return wrapped as T;
}

type Execute = Executable['execute'];

function wrapExecute(turn: Turn, name: string, execute: Execute): (input: unknown, options: ToolExecutionOptions) => unknown {
  const run = (token: CancelToken, input: unknown, options: ToolExecutionOptions): unknown =>
    (execute as (input: unknown, options: ToolExecutionOptions) => unknown)(input, { ...options, abortSignal: token.signal });
  if (isAsyncGeneratorFunction(execute)) {
    return (input, options) => streamCall(turn, name, input, options, run);
  }
  return (input, options) => call(turn, name, input, options, async (token) => {
    const result = run(token, input, options);
    return isAsyncIterable(result) ? lastOf(result) : result;
  });
}

/** The call ids `aiTools` recorded in each turn, so a repeated `toolCallId` gets one of its own. */
const recordedIds = new WeakMap<Turn, Set<string>>();

/**
 * The call id to record for the model's `toolCallId`: itself, or, when the model already used it in
 * this turn (models do repeat them), `<id>-2`, `<id>-3`, … The call still runs and is recorded; the
 * SDK pairs its result by its own id, and the history keeps every call's id unique in its turn.
 */
function recordedId(turn: Turn, toolCallId: string): string {
  let ids = recordedIds.get(turn);
  if (ids === undefined) recordedIds.set(turn, ids = new Set());
  let id = toolCallId;
  for (let n = 2; ids.has(id); n++) id = `${toolCallId}-${n}`;
  ids.add(id);
  return id;
}

/** One `turn.tool` call under the model's id, with the SDK call's own signal tied to the call's token. */
function call<R>(turn: Turn, name: string, input: unknown, options: ToolExecutionOptions, fn: (token: CancelToken) => Promise<R>): Promise<R> {
  checkId('options.toolCallId', options?.toolCallId);
  const callId = recordedId(turn, options.toolCallId);
  const outer = options.abortSignal;
  return turn.tool(name, input, (token) => {
    if (outer === undefined || outer === turn.signal) return fn(token);
    // An abort of the SDK call's own signal is a cancel of this call only: its tool_output
    // records the failure, and the turn goes on unless the turn itself is stopped.
    const onAbort = () => { token.cancel(outer.reason); };
    if (outer.aborted) onAbort();
    else outer.addEventListener('abort', onAbort, { once: true });
    return fn(token).finally(() => outer.removeEventListener('abort', onAbort));
  }, { callId });
}

/** Why a streamed call is cancelled when its consumer leaves (`return()` on its iterator). */
const CONSUMER_LEFT = 'the consumer stopped reading the tool\'s results';

/**
 * An `async function*` tool: its values are passed on one at a time as the consumer asks (the tool
 * runs at most one value ahead), and the call records the last. A consumer that leaves early
 * (`return()`, a `break` out of its loop) cancels the call: its `abortSignal` aborts, the tool's
 * generator is returned (its `finally` runs), the call records a failed output, and `return()`
 * resolves once the call has ended, so nothing of the tool runs after it.
 */
async function* streamCall(
  turn: Turn, name: string, input: unknown, options: ToolExecutionOptions,
  run: (token: CancelToken, input: unknown, options: ToolExecutionOptions) => unknown,
): AsyncGenerator<unknown, void, undefined> {
  let pending: { value: unknown } | undefined;
  let ended = false;
  let left = false;
  let callToken: CancelToken | undefined;
  // `wake` moves the consumer on (a value, or the end); `taken` moves the tool on (taken, or left).
  let wake: (() => void) | undefined;
  let taken: (() => void) | undefined;
  const done = call(turn, name, input, options, async (token) => {
    callToken = token;
    if (left) { // it left while `tool_call` was being recorded: the tool never starts
      token.cancel(CONSUMER_LEFT);
      throw token.reason;
    }
    // A stop of the call moves the tool on too: a stop need not wait for a reader.
    const onAbort = () => taken?.();
    token.signal.addEventListener('abort', onAbort, { once: true });
    let last: unknown;
    try {
      for await (const value of run(token, input, options) as AsyncIterable<unknown>) {
        last = value;
        pending = { value };
        wake?.();
        if (!token.signal.aborted && !left) await new Promise<void>((resolve) => { taken = resolve; });
        taken = undefined;
        if (left || token.signal.aborted) throw token.reason; // leaving the loop returns the tool's generator
      }
    } finally {
      token.signal.removeEventListener('abort', onAbort);
    }
    return last;
  }).finally(() => { ended = true; wake?.(); });
  // The call's failure is rethrown below once its values are passed on; never unhandled meanwhile.
  done.catch(() => {});
  try {
    for (;;) {
      if (pending !== undefined) {
        const { value } = pending;
        pending = undefined;
        yield value;
        taken?.();
        continue;
      }
      if (ended) break;
      await new Promise<void>((resolve) => { wake = resolve; });
      wake = undefined;
    }
    await done;
  } finally {
    if (!ended) {
      // The consumer left before the call ended (the only way here with the call still running).
      left = true;
      callToken?.cancel(CONSUMER_LEFT);
      taken?.();
      await done.catch(() => {});
    }
  }
}

async function lastOf(values: AsyncIterable<unknown>): Promise<unknown> {
  let last: unknown;
  for await (const value of values) last = value;
  return last;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value != null && typeof (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] === 'function';
}

/** `async function*`'s constructor: not a global, so taken from one. */
const AsyncGeneratorFunction = (async function* () {}).constructor;

/**
 * Whether `fn` is an `async function*` (or a bound one, or a Proxy of one), by its prototype chain,
 * not by its `toString` or `Symbol.toStringTag`, which any function may fake or lack.
 */
function isAsyncGeneratorFunction(fn: Function): boolean {
  return fn instanceof AsyncGeneratorFunction;
}
