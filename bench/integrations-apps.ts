// The integrations suite's apps: one small agent app per framework, each built twice — with
// fullstop (a TurnRunner turn, the framework given `turn.signal`, tools through `turn.tool` or
// `aiTools`/`mcpTurns`) and as the same app with plain Piscina `signal` + `child_process` (the
// framework's own signal passed down). Each run's one tool call starts the CPU-bound `crunch` task
// and a process tree (`sh` with two `sleep 30`); `start` resolves once both are running.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Piscina } from 'piscina';
import { z } from 'zod';
import { exec, TurnPool, TurnRegistry, TurnRunner, type Turn } from '../src/index.js';
import { flagCells, READY } from './handshake.js';
import { pidfile, pidsOf } from './trees.js';
import { TID, type CrunchTask } from './workers/integrations-tasks.js';

const TASKS = new URL('./workers/integrations-tasks.js', import.meta.url).href;
/** The tree: two sleeps, their pids written to "$1" once both run (the handshake). */
const SCRIPT = 'sleep 30 & a=$!; sleep 30 & b=$!; echo "$a $b" > "$1"; wait';

export type Side = 'fullstop' | 'plain';
/**
 * One run of an app, its tool running: `stop()` is the app's stop, `settled` the framework's own
 * promise, `ended` the whole run (the turn, and the tool's task and `sh`), `next()` the app's next call.
 */
export interface Running {
  stop(): void; settled: Promise<unknown>; ended: Promise<unknown>; pids: number[]; next(): Promise<unknown>;
  /** Resolves once the crunch loop cannot run again: its task settled (fullstop) or its thread is gone (plain). */
  loopOver(): Promise<void>;
}
type Begun = { stop(): void; readonly settled: Promise<unknown>; ended?: Promise<unknown> };
/** An app of one side; fullstop's has its `registry` and `pool` (for the leak check and the row's extra). */
export interface App { start(): Promise<Running>; close(): Promise<void>; registry?: TurnRegistry; pool?: TurnPool }

/** What the tool of the run under way works on (set by `start`, read by the framework's tool); `task$`: its pool call. */
interface Current { task: CrunchTask; file: string; task$?: Promise<unknown>; work$?: Promise<unknown> }

/** The engines of one side: fullstop's pool and runner, or a plain Piscina. */
function engines(side: Side) {
  if (side === 'fullstop') {
    const registry = new TurnRegistry();
    const pool = new TurnPool({ filename: TASKS, minThreads: 1, maxThreads: 1 });
    return { side, registry, pool, runner: new TurnRunner({ registry, pool }), close: () => pool.close() };
  }
  const piscina = new Piscina({ filename: TASKS, minThreads: 1, maxThreads: 1 });
  return { side, piscina, close: () => piscina.close() };
}
type Engines = ReturnType<typeof engines>;

/** The tool's work: the crunch task and the tree, both bound to the turn (fullstop) or to `signal` (plain). */
function work(e: Engines, current: Current, signal?: AbortSignal): Promise<unknown> {
  if (e.side === 'fullstop') {
    current.task$ = e.pool!.run(current.task, { name: 'crunch' });
    const tree = exec('sh', ['-c', SCRIPT, 'tree', current.file]);
    current.work$ = Promise.allSettled([current.task$, tree]);
    return Promise.all([current.task$, tree]);
  }
  const child = spawn('sh', ['-c', SCRIPT, 'tree', current.file], { signal, stdio: 'ignore' });
  const exited = new Promise((resolve) => { child.once('exit', resolve); child.once('error', resolve); });
  current.task$ = e.piscina!.run(current.task, { name: 'crunch', signal });
  current.work$ = Promise.allSettled([current.task$, exited]);
  return Promise.all([current.task$, exited]);
}

/** Until the kernel thread `tid` of this process has exited (a terminated worker's), polled every event-loop turn. */
async function threadGone(tid: number): Promise<void> {
  for (const deadline = Date.now() + 10_000; existsSync(`/proc/self/task/${tid}`); await new Promise((r) => setImmediate(r))) {
    if (Date.now() > deadline) throw new Error(`worker thread ${tid} still runs 10 s after its abort`);
  }
}

/** A run: `begin` starts the framework call; resolves once the tool's task and tree are running. */
async function started(current: Current, begin: () => Begun, next: () => Promise<unknown>): Promise<Running> {
  current.task = { flags: flagCells(), check: current.task.check };
  current.file = pidfile();
  const run = begin();
  const wait = Atomics.waitAsync(current.task.flags, READY, 0, 60_000);
  if (wait.async) await wait.value;
  const pids = await pidsOf(current.file, false);
  const settled = run.settled; // the tool runs, so the framework call has begun
  settled.catch(() => {}); // awaited by the sample; a stop rejects it meanwhile
  const [task$, work$, tid] = [current.task$!, current.work$!, Atomics.load(current.task.flags, TID)];
  // fullstop's task settles once its loop threw; plain Piscina's rejects at the abort, before its thread is gone.
  const loopOver = () => (current.task.check ? task$.then(() => {}, () => {}) : threadGone(tid));
  // The run has ended once the framework call (fullstop: the turn) and the tool's work (its `sh` exited) have.
  const ended = Promise.all([run.ended ?? settled.catch(() => {}), work$]);
  return { stop: () => run.stop(), settled, ended, pids, next, loopOver };
}

/** fullstop's side of a run: `call(turn)` is the framework call inside a turn, stopped by `runner.stop`. */
function inTurn(e: Engines, call: (turn: Turn) => Promise<unknown>): Begun {
  const session = sessionId();
  let settled!: Promise<unknown>;
  const ended = e.runner!.run(session, (turn) => (settled = call(turn)));
  return { stop: () => void e.runner!.stop(session), get settled() { return settled; }, ended };
}

let calls = 0;
const sessionId = () => `bench-${++calls}`;

/** ai@6's generateText with a mock model that calls `crunch`; fullstop's side wraps the tools with `aiTools`. */
export async function aiApp(side: Side): Promise<App> {
  const [{ generateText, tool }, { MockLanguageModelV3 }, { aiTools }] = await Promise.all([import('ai'), import('ai/test'), import('../src/ai-sdk/index.js')]);
  const e = engines(side);
  const current: Current = { task: { check: side === 'fullstop' } as CrunchTask, file: '' };
  const model = () => new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [{ type: 'tool-call', toolCallId: `call_${++calls}`, toolName: 'crunch', input: '{}' }],
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, warnings: [],
      usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
    }),
  });
  const tools = { crunch: tool({ inputSchema: z.object({}), execute: (_input, { abortSignal }) => work(e, current, abortSignal) }) };
  const next = () => Promise.resolve();
  return {
    ...e,
    start: () => started(current, () => {
      if (e.side === 'plain') {
        const controller = new AbortController();
        return { stop: () => controller.abort(), settled: generateText({ model: model(), tools, abortSignal: controller.signal, prompt: 'crunch' }) };
      }
      return inTurn(e, (turn) => generateText({ model: model(), tools: aiTools(turn, tools), abortSignal: turn.signal, prompt: 'crunch' }));
    }, next),
  };
}

/** An MCP server and client over the SDK's in-memory transport; the client cancels its call (`notifications/cancelled`). */
export async function mcpApp(side: Side): Promise<App> {
  const [{ McpServer }, { Client }, { InMemoryTransport }, { mcpTurns }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/mcp.js'), import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/inMemory.js'), import('../src/mcp/index.js')]);
  const e = engines(side);
  const current: Current = { task: { check: side === 'fullstop' } as CrunchTask, file: '' };
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  let handled: Promise<unknown> = Promise.resolve();
  const text = (value: unknown) => ({ content: [{ type: 'text' as const, text: String(value) }] });
  if (e.side === 'fullstop') {
    const turns = mcpTurns(server, { runner: e.runner! });
    server.registerTool('crunch', {}, turns.tool(async (_args, turn) => text(await (handled = turn.tool('crunch', {}, () => work(e, current))))));
    server.registerTool('sum', {}, turns.tool(async () => text(await e.pool!.run(100, { name: 'sum' }))));
  } else {
    server.registerTool('crunch', {}, async (extra) => text(await (handled = work(e, current, extra.signal))));
    server.registerTool('sum', {}, async () => text(await e.piscina!.run(100, { name: 'sum' })));
  }
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(clientSide);
  return {
    ...e,
    start: () => started(current, () => {
      const controller = new AbortController();
      void client.callTool({ name: 'crunch' }, undefined, { signal: controller.signal }).catch(() => {});
      // The server's handler is the call's end here: the client's own promise rejects at its abort.
      return { stop: () => controller.abort(), get settled() { return handled; } };
    }, () => client.callTool({ name: 'sum' })),
    close: async () => { await client.close(); await e.close(); },
  };
}

/** LangGraph's prebuilt ReAct agent with @langchain/core's fake streaming model calling `crunch`. */
export async function langgraphApp(side: Side): Promise<App> {
  const [{ createReactAgent }, { tool }, { FakeStreamingChatModel }] = await Promise.all([
    import('@langchain/langgraph/prebuilt'), import('@langchain/core/tools'), import('@langchain/core/utils/testing')]);
  const e = engines(side);
  const current: Current = { task: { check: side === 'fullstop' } as CrunchTask, file: '' };
  const crunch = tool(async (input, config) => {
    if (e.side === 'plain') return work(e, current, config.signal);
    const turn = config.configurable!.turn as Turn;
    return turn.tool('crunch', input, () => work(e, current), { callId: config.toolCall?.id });
  }, { name: 'crunch', description: 'crunch', schema: z.object({}) });
  const llm = new FakeStreamingChatModel({ chunks: [{ content: '', tool_calls: [{ id: 'call_lg', name: 'crunch', args: {} }] } as never] });
  const agent = createReactAgent({ llm, tools: [crunch] });
  const input = { messages: [{ role: 'user', content: 'crunch' }] };
  return {
    ...e,
    start: () => started(current, () => {
      if (e.side === 'plain') {
        const controller = new AbortController();
        return { stop: () => controller.abort(), settled: agent.invoke(input, { signal: controller.signal }) };
      }
      return inTurn(e, (turn) => agent.invoke(input, { signal: turn.signal, configurable: { turn } }));
    }, () => Promise.resolve()),
  };
}

/** OpenAI Agents JS with a scripted `Model` calling `crunch` (tracing off, no network). */
export async function agentsApp(side: Side): Promise<App> {
  const { Agent, Usage, run, setTracingDisabled, tool } = await import('@openai/agents');
  setTracingDisabled(true);
  const e = engines(side);
  const current: Current = { task: { check: side === 'fullstop' } as CrunchTask, file: '' };
  const crunch = tool({
    name: 'crunch', description: 'crunch', parameters: z.object({}),
    execute: (input, context, details) => {
      if (e.side === 'plain') return work(e, current, details?.signal);
      const { turn } = context!.context as { turn: Turn };
      return turn.tool('crunch', input, () => work(e, current), { callId: details?.toolCall?.callId });
    },
  });
  const model = {
    async getResponse() {
      return { usage: new Usage(), output: [{ type: 'function_call' as const, callId: `call_${++calls}`, name: 'crunch', arguments: '{}', status: 'completed' as const }] };
    },
    async *getStreamedResponse(): AsyncIterable<never> { throw new Error('the scripted model does not stream'); },
  };
  const agent = new Agent({ name: 'bench', instructions: 'crunch', model, tools: [crunch] });
  return {
    ...e,
    start: () => started(current, () => {
      if (e.side === 'plain') {
        const controller = new AbortController();
        return { stop: () => controller.abort(), settled: run(agent, 'crunch', { signal: controller.signal }) };
      }
      return inTurn(e, (turn) => run(agent, 'crunch', { signal: turn.signal, context: { turn } }));
    }, () => Promise.resolve()),
  };
}
