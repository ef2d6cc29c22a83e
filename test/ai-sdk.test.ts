/**
 * `fullstop/ai-sdk` with the real AI SDK, ai@6 (`ai`) and ai@5 (`ai-v5`), driven by the SDK's own
 * mock models: each model tool call runs as the turn's tool call under the model's id, with the
 * call's token ambient (a TurnPool task and an exec child inside need no token), and a stop
 * mid-tool stops the worker loop cooperatively, the process tree is gone and the SDK call settles.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { z } from 'zod';
import * as ai6 from 'ai';
import * as ai5 from 'ai-v5';
import { activeToken, exec, isCancelledError, type LedgerEntry } from '../dist/src/index.js';
import { aiTools } from '../dist/src/ai-sdk/index.js';
import { started } from './support/handshake.js';
import { eventually, isGone } from './support/leaks.js';
import { integrationScene } from './fixtures/integrations/scene.js';
import { pidFile, SLEEPS, treePids } from './fixtures/integrations/tree.js';
import { scriptedModel } from './fixtures/integrations/models.mjs';

const scene = integrationScene('fullstop-ai-sdk-');
const { pool } = scene;

async function entriesOf(turnId: string): Promise<LedgerEntry[]> {
  return scene.ledger.entries({ turnId });
}

/** [0] started, [1] iterations, [2] the worker's threadId (test/fixtures/integrations/tasks.mjs). */
function flags(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(12));
}

const SDKS = [{ version: 6, sdk: ai6 as any }, { version: 5, sdk: ai5 as any }];

describe.each(SDKS)('aiTools with ai@$version', ({ version, sdk }) => {
  const sumTool = (seen: any[]) => sdk.tool({
    description: 'sum 1..n on a worker',
    inputSchema: z.object({ n: z.number() }),
    execute: async ({ n }: { n: number }, options: any) => {
      seen.push({ token: activeToken(), signal: options.abortSignal, toolCallId: options.toolCallId });
      return pool.run({ n }, { name: 'sum' }); // no token: the call's token is ambient
    },
  });

  it("runs each tool call as the turn's tool call under the model's toolCallId, with the call's token ambient", async () => {
    const { model, prompts } = scriptedModel(version, [
      { calls: [{ id: 'call_model_1', name: 'sum', input: { n: 10 } }] },
      { text: 'the sum is 55' },
    ]);
    const seen: any[] = [];
    let turnToken: unknown;
    const outcome = await scene.runner.run('s', async (turn) => {
      turnToken = turn.token;
      const result = await sdk.generateText({ model, tools: aiTools(turn, { sum: sumTool(seen) }), stopWhen: sdk.stepCountIs(3), prompt: 'sum to 10' });
      return result.text;
    });
    expect(outcome).toMatchObject({ status: 'completed', value: 'the sum is 55' });
    expect(seen).toHaveLength(1);
    expect(seen[0].toolCallId).toBe('call_model_1');
    // The ambient token is the call's own child token, not the turn's, and execute's signal is its signal.
    expect(seen[0].token).toBeDefined();
    expect(seen[0].token).not.toBe(turnToken);
    expect(seen[0].token.turnId).toBe(outcome.turnId);
    expect(seen[0].signal).toBe(seen[0].token.signal);
    const entries = await entriesOf(outcome.turnId);
    const call = entries.find((e) => e.type === 'tool_call');
    const output = entries.find((e) => e.type === 'tool_output');
    expect(call).toMatchObject({ callId: 'call_model_1', name: 'sum', args: { n: 10 } });
    expect(output).toMatchObject({ callId: 'call_model_1', success: true, output: { total: 55 } });
    // The model's second request carried the recorded result under its own id.
    const toolMessage = prompts[1].find((m: any) => m.role === 'tool');
    expect(toolMessage.content[0]).toMatchObject({ toolCallId: 'call_model_1', output: { type: 'json', value: { total: 55 } } });
  });

  it('a stop mid-tool stops the worker loop cooperatively, aborts the abortSignal execute got (the SDK call had none), records tool_aborted under the model id, and the SDK call settles; the next call reuses the worker', async () => {
    const f = flags();
    const { model } = scriptedModel(version, [{ calls: [{ id: 'call_crunch', name: 'crunch', input: {} }] }, { text: 'late' }]);
    let signal: AbortSignal | undefined;
    const crunch = sdk.tool({
      inputSchema: z.object({}),
      execute: async (_input: unknown, options: any) => {
        signal = options.abortSignal;
        return pool.run({ flags: f }, { name: 'crunchUntilStopped' });
      },
    });
    const before = pool.stats();
    let sdkCall!: Promise<unknown>;
    const run = scene.runner.run('s', async (turn) => {
      sdkCall = sdk.generateText({ model, tools: aiTools(turn, { crunch }), stopWhen: sdk.stepCountIs(3), prompt: 'crunch' });
      return sdkCall;
    });
    await started(f);
    const report = await scene.runner.stop('s');
    const outcome = await run;
    expect(outcome.status).toBe('cancelled');
    expect(report).toMatchObject({ settledCooperatively: true, hardStopped: { workers: 0 } });
    expect(pool.stats().cooperativeStops).toBe(before.cooperativeStops + 1);
    expect(pool.stats().hardStops).toBe(before.hardStops);
    expect(signal!.aborted).toBe(true);
    expect(isCancelledError(signal!.reason)).toBe(true);
    await sdkCall.then(() => {}, () => {}); // settles, whichever way the SDK ends it
    const aborted = (await entriesOf(outcome.turnId)).filter((e) => e.type === 'tool_aborted');
    expect(aborted).toEqual([expect.objectContaining({ callId: 'call_crunch', output: expect.stringMatching(/^aborted by user after \d+\.\ds$/) })]);

    const next = scriptedModel(version, [{ calls: [{ id: 'call_next', name: 'sum', input: { n: 3 } }] }, { text: 'ok' }]);
    const seen: any[] = [];
    const second = await scene.runner.run('s', async (turn) => {
      await sdk.generateText({ model: next.model, tools: aiTools(turn, { sum: sumTool(seen) }), stopWhen: sdk.stepCountIs(3), prompt: 'again' });
      return (await entriesOf(turn.turnId)).find((e) => e.type === 'tool_output');
    });
    expect((second as any).value.output).toEqual({ total: 6, threadId: Atomics.load(f, 2) });
  });

  it('with streamText and abortSignal: turn.signal, a stop mid-tool ends the stream with its abort part, stops the loop cooperatively and settles the run', async () => {
    const f = flags();
    const { model } = scriptedModel(version, [{ text: 'Crunching. ', calls: [{ id: 'call_stream', name: 'crunch', input: {} }] }, { text: 'late' }]);
    const crunch = sdk.tool({ inputSchema: z.object({}), execute: async () => pool.run({ flags: f }, { name: 'crunchUntilStopped' }) });
    const parts: string[] = [];
    let aborts = 0;
    const before = pool.stats();
    const run = scene.runner.run('s', async (turn) => {
      const result = sdk.streamText({
        model, tools: aiTools(turn, { crunch }), stopWhen: sdk.stepCountIs(3), prompt: 'crunch', abortSignal: turn.signal, onAbort: () => { aborts++; },
      });
      for await (const part of result.fullStream) parts.push(part.type);
    });
    await started(f);
    const report = await scene.runner.stop('s');
    const outcome = await run;
    expect(outcome.status).toBe('cancelled');
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect(parts).toContain('tool-call');
    expect(parts.at(-1)).toBe('abort');
    expect(aborts).toBe(1);
    expect(pool.stats()).toMatchObject({ cooperativeStops: before.cooperativeStops + 1, hardStops: before.hardStops });
    const aborted = (await entriesOf(outcome.turnId)).filter((e) => e.type === 'tool_aborted');
    expect(aborted).toEqual([expect.objectContaining({ callId: 'call_stream' })]);
  });

  it('a stop mid-tool reaches an exec child started without a token: the tree is gone and the run settles', async () => {
    const { model } = scriptedModel(version, [{ calls: [{ id: 'call_sh', name: 'shell', input: {} }] }]);
    const file = pidFile();
    const shell = sdk.tool({
      inputSchema: z.object({}),
      execute: async () => exec('sh', ['-c', SLEEPS, 'tree', file]),
    });
    const run = scene.runner.run('s', (turn) => sdk.generateText({ model, tools: aiTools(turn, { shell }), prompt: 'sh' }));
    const tree = await treePids(file);
    await scene.runner.stop('s');
    expect((await run).status).toBe('cancelled');
    expect(tree.filter((pid) => !isGone(pid))).toEqual([]);
  });

  it("an abort of the SDK call's own abortSignal cancels that call only: the worker loop stops, the failure is the tool's output, and the turn goes on", async () => {
    const f = flags();
    const { model } = scriptedModel(version, [{ calls: [{ id: 'call_own', name: 'crunch', input: {} }] }]);
    const crunch = sdk.tool({ inputSchema: z.object({}), execute: async () => pool.run({ flags: f }, { name: 'crunchUntilStopped' }) });
    const request = new AbortController();
    const before = pool.stats();
    const run = scene.runner.run('s', async (turn) => {
      const call = sdk.generateText({ model, tools: aiTools(turn, { crunch }), prompt: 'crunch', abortSignal: request.signal });
      await started(f);
      request.abort(new Error('request gone'));
      await call.catch(() => {});
      await eventually(() => pool.stats().running === 0, 5000, 'the task to end');
      return 'went on';
    });
    const outcome = await run;
    expect(outcome).toMatchObject({ status: 'completed', value: 'went on' });
    expect(pool.stats().cooperativeStops).toBe(before.cooperativeStops + 1);
    const output = (await entriesOf(outcome.turnId)).find((e) => e.type === 'tool_output');
    expect(output).toMatchObject({ callId: 'call_own', success: false });
  });

  it('an async generator tool keeps streaming its preliminary values; the call records the last', async () => {
    const { model } = scriptedModel(version, [{ calls: [{ id: 'call_gen', name: 'count', input: {} }] }, { text: 'counted' }]);
    const count = sdk.tool({
      inputSchema: z.object({}),
      async *execute() {
        const token = activeToken();
        for (let i = 1; i <= 3; i++) yield { i, ambient: token !== undefined };
      },
    });
    const results: any[] = [];
    const outcome = await scene.runner.run('s', async (turn) => {
      const result = sdk.streamText({ model, tools: aiTools(turn, { count }), stopWhen: sdk.stepCountIs(3), prompt: 'count' });
      for await (const part of result.fullStream) if (part.type === 'tool-result') results.push(part);
      return result.text;
    });
    expect(outcome).toMatchObject({ status: 'completed', value: 'counted' });
    expect(results.map((p) => [p.output.i, p.preliminary === true])).toEqual([[1, true], [2, true], [3, true], [3, false]]);
    expect(results[0].output.ambient).toBe(true);
    const output = (await entriesOf(outcome.turnId)).find((e) => e.type === 'tool_output');
    expect(output).toMatchObject({ callId: 'call_gen', success: true, output: { i: 3 } });
  });
});

describe('aiTools with an async generator tool whose consumer leaves early', () => {
  it('return() on the iterator cancels the call: its abortSignal aborts, the generator is returned, nothing more is produced, the call records a failure', async () => {
    let produced = 0;
    let finished = false;
    let signal: AbortSignal | undefined;
    const ticker = {
      async *execute(_input: unknown, options: any) {
        signal = options.abortSignal;
        try {
          // Ignores its signal on purpose: only fullstop's return() may end it.
          for (;;) {
            produced++;
            yield produced;
            await new Promise((resolve) => setImmediate(resolve));
          }
        } finally {
          finished = true;
        }
      },
    };
    const outcome = await scene.runner.run('s', async (turn) => {
      const iterator = (aiTools(turn, { ticker }).ticker.execute as any)({}, { toolCallId: 'call_tick', messages: [] }) as AsyncGenerator<number>;
      const first = [(await iterator.next()).value, (await iterator.next()).value];
      await iterator.return(undefined);
      const atReturn = produced;
      // Had it kept running (the bug: 116 more values in 600 ms), these turns of the loop would see it.
      for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
      return { first, atReturn, after: produced };
    });
    expect(outcome.status).toBe('completed');
    const { first, atReturn, after } = (outcome as any).value;
    expect(first).toEqual([1, 2]);
    expect(after).toBe(atReturn);
    expect(atReturn).toBeLessThanOrEqual(3); // at most one value ahead of its reader
    expect(finished).toBe(true);
    expect(signal!.aborted).toBe(true);
    const output = (await entriesOf(outcome.turnId)).find((e) => e.type === 'tool_output');
    expect(output).toMatchObject({ callId: 'call_tick', success: false });
  });

  it('detects a generator tool by its prototype, not its toString: a bound one and one whose toStringTag lies still stream', async () => {
    async function* count() { yield 1; yield 2; }
    const liar = async function* () { yield 1; yield 2; };
    Object.defineProperty(liar, Symbol.toStringTag, { value: 'Function' });
    for (const execute of [count.bind(null), liar]) {
      const outcome = await scene.runner.run('s', async (turn) => {
        const result = (aiTools(turn, { t: { execute } }).t.execute as any)({}, { toolCallId: 'call_g', messages: [] });
        const values: unknown[] = [];
        for await (const v of result) values.push(v);
        return values;
      });
      expect(outcome).toMatchObject({ status: 'completed', value: [1, 2] });
    }
  });
});

describe('aiTools arguments', () => {
  it('refuses a turn that is not one, tools that are not an object, and an execute that is not a function, naming each', async () => {
    expect(() => aiTools(null as any, {})).toThrow(new TypeError('turn: expected the Turn a runner\'s body receives, got null'));
    await scene.runner.run('s', async (turn) => {
      expect(() => aiTools(turn, null as any)).toThrow(/^tools: expected an object of AI SDK tools, got null$/);
      expect(() => aiTools(turn, [] as any)).toThrow(/^tools: .* got an array$/);
      expect(() => aiTools(turn, { a: 1 } as any)).toThrow(/^tools\.a: expected an AI SDK tool/);
      expect(() => aiTools(turn, { a: { execute: 'no' } } as any)).toThrow(/^tools\.a\.execute: expected a function, got "no"$/);
    });
  });

  it('passes tools without execute through unchanged and leaves the given object as it was', async () => {
    const clientSide = ai6.tool({ inputSchema: z.object({}) });
    const execute = async () => 1;
    const given = { clientSide, run: ai6.tool({ inputSchema: z.object({}), execute }) };
    await scene.runner.run('s', async (turn) => {
      const wrapped = aiTools(turn, given);
      expect(wrapped.clientSide).toBe(clientSide);
      expect(wrapped.run).not.toBe(given.run);
      expect(wrapped.run.inputSchema).toBe(given.run.inputSchema);
      expect(given.run.execute).toBe(execute);
    });
  });
});

/** The packages under node_modules a fresh `node` loads for `code` (an ES module body run in the repo). */
function packagesLoaded(code: string): string[] {
  const hook = new URL('./fixtures/integrations/record-loads.mjs', import.meta.url).pathname;
  const child = spawnSync(process.execPath, ['--import', hook, '--input-type=module', '-e', code], {
    cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8',
  });
  expect(child.status, child.stderr).toBe(0);
  const names = child.stderr.split('\n').flatMap((line) => {
    const m = /^LOAD file:.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line);
    return m === null ? [] : [m[1]];
  });
  return [...new Set(names)].sort();
}

/** The packages of the frameworks (and their own dependencies) that only their subpath may bring in. */
const FRAMEWORKS = /^(ai|zod|@ai-sdk\/.*|@modelcontextprotocol\/.*|@langchain\/.*|@openai\/.*|@opentelemetry\/.*|openai|redis|@redis\/.*)$/;

describe('the fullstop/ai-sdk and fullstop/mcp subpaths', () => {
  it("resolve through the package's exports, and neither they nor 'fullstop' load a framework package", () => {
    const frameworks = (code: string) => packagesLoaded(code).filter((name) => FRAMEWORKS.test(name));
    expect(packagesLoaded("await import('fullstop');")).toContain('piscina'); // the hook sees packages
    expect(frameworks("await import('fullstop');")).toEqual([]);
    expect(frameworks("const m = await import('fullstop/ai-sdk'); if (typeof m.aiTools !== 'function' || typeof m.toModelMessages !== 'function') process.exit(3);")).toEqual([]);
    expect(frameworks("const m = await import('fullstop/mcp'); if (typeof m.mcpTurns !== 'function') process.exit(3);")).toEqual([]);
    // The check can see a framework: importing `ai` itself lists it.
    expect(frameworks("await import('ai');")).toContain('ai');
  });
});
