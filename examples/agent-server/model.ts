/**
 * The agent's model: what it is told (`Message`), what it streams back (`ModelEvent`), and the two
 * models the server can run — the built-in scripted one (no network, deterministic) and, when
 * `OPENAI_BASE_URL` is set, a real OpenAI-compatible endpoint (openai-model.ts).
 *
 * A model streams a reply a token at a time and honours its `signal`: a stop aborts the stream
 * between two tokens (scripted) or mid-request (the SDK closes the connection).
 */

/** The tools a model may call (tools.ts runs them). */
export const TOOL_NAMES = ['crunch', 'shell', 'ask'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** One message of the conversation the model sees. */
export type Message =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls: ToolCall[] }
  | { role: 'tool'; toolCallId: string; name: ToolName; content: string };

/** A tool call the model asked for. */
export interface ToolCall {
  id: string;
  name: ToolName;
  args: Record<string, unknown>;
}

/** What a model's stream yields: text tokens, then (maybe) the tool calls of this step. */
export type ModelEvent = { type: 'text'; text: string } | { type: 'tool_call'; call: ToolCall };

/** A model: one step of the conversation, streamed. Rejects with `signal.reason` once aborted. */
export interface Model {
  readonly name: string;
  stream(messages: readonly Message[], signal: AbortSignal): AsyncIterable<ModelEvent>;
}

/** Milliseconds between two tokens of the scripted model: slow enough to watch a reply stream. */
const TOKEN_MS = 40;

/**
 * The built-in model: calls the tools named in the user's prompt, in order (`crunch 5` asks for
 * five phases instead of a hundred), saying what it does before each call, then sums up. Same
 * prompt, same reply.
 */
export class ScriptedModel implements Model {
  readonly name = 'scripted';
  readonly #tokenMs: number;

  constructor(tokenMs = TOKEN_MS) {
    this.#tokenMs = tokenMs;
  }

  async *stream(messages: readonly Message[], signal: AbortSignal): AsyncIterable<ModelEvent> {
    const userAt = messages.findLastIndex((m) => m.role === 'user');
    const prompt = (messages[userAt] as { content: string }).content;
    const plan = planTools(prompt);
    const results = messages.slice(userAt + 1).filter((m): m is Extract<Message, { role: 'tool' }> => m.role === 'tool');
    const next = plan[results.length];
    const text = next === undefined ? summary(prompt, results) : intro(next.name, results.length);
    for (const word of text.split(/(?<= )/)) {
      await tick(this.#tokenMs, signal);
      yield { type: 'text', text: word };
    }
    if (next !== undefined) yield { type: 'tool_call', call: { id: `scripted-${results.length + 1}`, ...next } };
  }
}

/** The tool calls a prompt names, in order: `crunch` / `crunch 5` / `shell` / `ask`. */
export function planTools(prompt: string): { name: ToolName; args: Record<string, unknown> }[] {
  const plan: { name: ToolName; args: Record<string, unknown> }[] = [];
  for (const [, word, count] of prompt.matchAll(/\b(crunch|shell|ask)\b(?:\s+(\d{1,4})\b)?/gi)) {
    const name = word.toLowerCase() as ToolName;
    if (name === 'crunch') plan.push({ name, args: { phases: count === undefined ? 100 : Math.max(1, Number(count)) } });
    else if (name === 'shell') plan.push({ name, args: {} });
    else plan.push({ name, args: { question: 'Shall I go on?' } });
  }
  return plan;
}

function intro(name: ToolName, done: number): string {
  const lead = done === 0 ? 'Sure. ' : 'Next, ';
  if (name === 'crunch') return `${lead}I will crunch some numbers in a worker thread; this takes about ten seconds.`;
  if (name === 'shell') return `${lead}I will run a shell command that starts two processes and waits for them.`;
  return `${lead}I need to ask you something first.`;
}

function summary(prompt: string, results: readonly { name: ToolName; content: string }[]): string {
  if (results.length === 0) {
    return `You said: "${prompt.slice(0, 80)}". I am the scripted model: name crunch, shell or ask in your prompt and I will call those tools in order, streaming as I go, so you can press Stop at any moment.`;
  }
  return `Done. ${results.map((r) => `${r.name} returned ${r.content.slice(0, 60)}`).join('; ')}.`;
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts (also if it already has). */
function tick(ms: number, signal: AbortSignal): Promise<void> {
  // An abort that fired while the caller handled the last token has already happened: a
  // listener added now would never run.
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => { clearTimeout(timer); reject(signal.reason); };
    const timer = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
