/**
 * The model behind an OpenAI-compatible endpoint, through the official `openai` SDK: used when
 * `OPENAI_BASE_URL` is set (with `OPENAI_API_KEY` and `MODEL`). The SDK is imported only then, so
 * the server runs without it. `signal: turn.signal` goes to every request: a stop closes the
 * HTTP stream at once instead of waiting for the model to finish its sentence.
 */
import type OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { type Message, type Model, type ModelEvent, type ToolCall, type ToolName } from './model.js';

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'crunch',
      description: 'Run a CPU-heavy computation (a SHA-256 hash chain) in a worker thread: about 0.1 s per phase.',
      parameters: { type: 'object', properties: { phases: { type: 'integer', minimum: 1, maximum: 1000, description: 'How many phases (default 100, about 10 s).' } } },
    },
  },
  {
    type: 'function',
    function: {
      name: 'shell',
      description: "Run `sh -c 'sleep 30 & sleep 30 & wait'`: a process tree that runs about 30 s.",
      parameters: { type: 'object', properties: {} },
    },
  },
  {
    type: 'function',
    function: {
      name: 'ask',
      description: 'Ask the user a question and wait for the answer.',
      parameters: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] },
    },
  },
];

const SYSTEM = 'You are the fullstop example agent. Use the tools when the user names them. Be brief.';

/** Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `MODEL` (default `gpt-4o-mini`). */
export async function openAIModelFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<Model> {
  const { default: OpenAIClient } = await import('openai');
  const client = new OpenAIClient({ baseURL: env.OPENAI_BASE_URL, apiKey: env.OPENAI_API_KEY ?? 'unset' });
  return new OpenAIModel(client, env.MODEL ?? 'gpt-4o-mini');
}

/** A `Model` over the `openai` SDK's streaming chat completions, with the three tools declared. */
export class OpenAIModel implements Model {
  readonly name: string;
  readonly #client: OpenAI;
  readonly #model: string;

  constructor(client: OpenAI, model: string) {
    this.#client = client;
    this.#model = model;
    this.name = `openai:${model}`;
  }

  async *stream(messages: readonly Message[], signal: AbortSignal): AsyncIterable<ModelEvent> {
    const stream = await this.#client.chat.completions.create(
      { model: this.#model, messages: [{ role: 'system', content: SYSTEM }, ...messages.map(toParam)], tools: TOOLS, stream: true },
      { signal },
    );
    // Tool calls arrive in pieces (name first, arguments in fragments), keyed by index.
    const calls = new Map<number, { id: string; name: string; args: string }>();
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      if (delta?.content) yield { type: 'text', text: delta.content };
      for (const part of delta?.tool_calls ?? []) {
        const call = calls.get(part.index) ?? { id: '', name: '', args: '' };
        call.id ||= part.id ?? '';
        call.name += part.function?.name ?? '';
        call.args += part.function?.arguments ?? '';
        calls.set(part.index, call);
      }
    }
    for (const [index, call] of calls) yield { type: 'tool_call', call: toToolCall(call, index) };
  }
}

function toParam(message: Message): ChatCompletionMessageParam {
  if (message.role === 'user') return message;
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  return {
    role: 'assistant',
    content: message.content,
    ...(message.toolCalls.length === 0 ? {} : {
      tool_calls: message.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: JSON.stringify(c.args) } })),
    }),
  };
}

/** A model may name a tool we do not have or send broken JSON: the tool layer reports that back to it. */
function toToolCall(call: { id: string; name: string; args: string }, index: number): ToolCall {
  let args: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(call.args || '{}');
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
  } catch {
    args = { invalidArguments: call.args };
  }
  // An unknown name is passed on as is: tools.ts answers it with a ToolError the model can read.
  return { id: call.id || `call-${index}`, name: call.name as ToolName, args };
}
