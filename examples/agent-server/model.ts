/**
 * The agent's model, as the AI SDK sees one (a `LanguageModelV3`): the built-in scripted model
 * (no network, deterministic) here, or, when `OPENAI_BASE_URL` is set, a real OpenAI-compatible
 * endpoint through `@ai-sdk/openai` (openai-model.ts). The agent (agent.ts) runs either through
 * `streamText`, so the scripted model is exercised exactly as a provider is: the AI SDK validates
 * its stream, runs the tools it calls and feeds their results back.
 *
 * The scripted model streams a token at a time and honours the call's `abortSignal`: a stop ends
 * its stream between two tokens.
 */
import { appendFileSync } from 'node:fs';
import type {
  LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Message, LanguageModelV3StreamPart, LanguageModelV3StreamResult,
} from '@ai-sdk/provider';

/** The tools a model may call (tools.ts defines them). */
export const TOOL_NAMES = ['crunch', 'shell', 'ask'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** Milliseconds between two tokens of the scripted model: slow enough to watch a reply stream. */
const TOKEN_MS = 40;
/**
 * The environment variable naming a file where the scripted model appends each prompt it gets as
 * one JSON line (`{ prompt }`): what the model saw, for tests and for looking.
 */
export const PROMPT_LOG_ENV = 'SCRIPTED_MODEL_PROMPT_LOG';

/** The scripted model's settings. */
export interface ScriptedModelOptions {
  /** @default 40 */
  tokenMs?: number;
  /** A file each call's prompt is appended to, one JSON line per call. */
  promptLog?: string;
}

/** A step's tool call, as the scripted model plans it from the prompt. */
interface PlannedCall { name: ToolName; args: Record<string, unknown> }

/**
 * The built-in model: calls the tools named in the user's prompt, in order (`crunch 5` asks for
 * five phases instead of a hundred), saying what it does before each call, then sums up. Same
 * prompt, same reply.
 */
export class ScriptedModel implements LanguageModelV3 {
  readonly specificationVersion = 'v3';
  readonly provider = 'fullstop-example';
  readonly modelId = 'scripted';
  readonly supportedUrls = {};
  readonly #tokenMs: number;
  readonly #promptLog: string | undefined;

  constructor(options: ScriptedModelOptions = {}) {
    this.#tokenMs = options.tokenMs ?? TOKEN_MS;
    this.#promptLog = options.promptLog;
  }

  /** The scripted model streams only (the agent uses `streamText`). */
  doGenerate(): never {
    throw new Error('ScriptedModel: only doStream is implemented; use streamText');
  }

  async doStream(options: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
    const { prompt, abortSignal } = options;
    if (this.#promptLog !== undefined) appendFileSync(this.#promptLog, `${JSON.stringify({ prompt })}\n`);
    const userAt = prompt.findLastIndex((m) => m.role === 'user');
    const text = userAt < 0 ? '' : textOf(prompt[userAt]);
    const plan = planTools(text);
    const results = prompt.slice(userAt + 1).flatMap((m) => (m.role === 'tool' ? m.content : []))
      .filter((p) => p.type === 'tool-result');
    const next = plan[results.length];
    const reply = next === undefined ? summary(text, results) : intro(next.name, results.length);
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 'text-1' },
      ...reply.split(/(?<= )/).map((delta): LanguageModelV3StreamPart => ({ type: 'text-delta', id: 'text-1', delta })),
      { type: 'text-end', id: 'text-1' },
      ...(next === undefined ? [] : [{ type: 'tool-call', toolCallId: `scripted-${results.length + 1}`, toolName: next.name, input: JSON.stringify(next.args) } as const]),
      { type: 'finish', finishReason: { unified: next === undefined ? 'stop' : 'tool-calls', raw: undefined }, usage: NO_USAGE },
    ];
    const tokenMs = this.#tokenMs;
    let at = 0;
    const stream = new ReadableStream<LanguageModelV3StreamPart>({
      async pull(controller) {
        const part = parts[at++];
        if (part === undefined) return controller.close();
        // A token takes its time; a stop ends the stream between two tokens with the signal's reason.
        if (part.type === 'text-delta') await tick(tokenMs, abortSignal);
        controller.enqueue(part);
      },
    });
    return { stream };
  }
}

const NO_USAGE = {
  inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: undefined, text: undefined, reasoning: undefined },
};

/** The tool calls a prompt names, in order: `crunch` / `crunch 5` / `shell` / `ask`. */
export function planTools(prompt: string): PlannedCall[] {
  const plan: PlannedCall[] = [];
  for (const [, word, count] of prompt.matchAll(/\b(crunch|shell|ask)\b(?:\s+(\d{1,4})\b)?/gi)) {
    const name = word.toLowerCase() as ToolName;
    if (name === 'crunch') plan.push({ name, args: { phases: count === undefined ? 100 : Math.max(1, Number(count)) } });
    else if (name === 'shell') plan.push({ name, args: {} });
    else plan.push({ name, args: { question: 'Shall I go on?' } });
  }
  return plan;
}

function textOf(message: LanguageModelV3Message): string {
  if (typeof message.content === 'string') return message.content;
  return message.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
}

function intro(name: ToolName, done: number): string {
  const lead = done === 0 ? 'Sure. ' : 'Next, ';
  if (name === 'crunch') return `${lead}I will crunch some numbers in a worker thread; this takes about ten seconds.`;
  if (name === 'shell') return `${lead}I will run a shell command that starts two processes and waits for them.`;
  return `${lead}I need to ask you something first.`;
}

function summary(prompt: string, results: readonly { toolName: string; output: { type: string; value?: unknown } }[]): string {
  if (results.length === 0) {
    return `You said: "${prompt.slice(0, 80)}". I am the scripted model: name crunch, shell or ask in your prompt and I will call those tools in order, streaming as I go, so you can press Stop at any moment.`;
  }
  const said = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value)).slice(0, 60);
  return `Done. ${results.map((r) => `${r.toolName} returned ${said(r.output.value)}`).join('; ')}.`;
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts (also if it already has). */
function tick(ms: number, signal: AbortSignal | undefined): Promise<void> {
  // An abort that fired while the caller handled the last token has already happened: a
  // listener added now would never run.
  signal?.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => { clearTimeout(timer); reject(signal!.reason); };
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
