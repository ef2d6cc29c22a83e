/**
 * The OpenAI Agents JS recipe of docs/integrations.md, with the real @openai/agents and a scripted
 * `Model` (no network; tracing off): the turn's signal goes to `run`, the turn itself in the run
 * context, and each tool runs through `turn.tool` under the model's call id. A stop mid-tool stops
 * the TurnPool worker loop cooperatively, the exec tree is gone, and `run` settles; a call that
 * finishes is recorded under the model's id and the agent goes on to its answer.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Agent, Usage, run, setTracingDisabled, tool, type Model, type ModelResponse } from '@openai/agents';
import { exec, type Turn } from '../dist/src/index.js';
import { started } from './support/handshake.js';
import { isGone } from './support/leaks.js';
import { integrationScene } from './fixtures/integrations/scene.js';
import { pidFile, SLEEPS, treePids } from './fixtures/integrations/tree.js';

setTracingDisabled(true);
const scene = integrationScene('fullstop-agents-');
const { pool } = scene;

/** A model that answers each request with the next of `steps` (output items), the last one again after. */
function scriptedModel(steps: ModelResponse['output'][]): Model {
  let calls = 0;
  return {
    async getResponse() {
      return { usage: new Usage(), output: steps[Math.min(calls++, steps.length - 1)], responseId: `resp_${calls}` };
    },
    async *getStreamedResponse() { throw new Error('the scripted model does not stream'); },
  };
}

const callStep = (callId: string, name: string, args: object): ModelResponse['output'] =>
  [{ type: 'function_call', callId, name, arguments: JSON.stringify(args), status: 'completed' }];
const textStep = (text: string): ModelResponse['output'] =>
  [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] }];

/** The recipe's tool: the turn comes from the run context, the model's call id from `details`. */
function turnTool<P extends z.ZodObject>(name: string, parameters: P, fn: (input: z.infer<P>) => Promise<unknown>) {
  return tool({
    name, description: name, parameters,
    execute: (input, context, details) => {
      const { turn } = context!.context as { turn: Turn };
      return turn.tool(name, input, () => fn(input), { callId: details?.toolCall?.callId });
    },
  });
}

describe('OpenAI Agents JS recipe', () => {
  it('a stop mid-tool stops the worker loop cooperatively, the exec tree is gone, run settles, and the call is aborted under the model id', async () => {
    const flags = new Int32Array(new SharedArrayBuffer(12));
    const file = pidFile();
    const crunch = turnTool('crunch', z.object({}), () => Promise.all([
      pool.run({ flags }, { name: 'crunchUntilStopped' }), // no token: the call's token is ambient
      exec('sh', ['-c', SLEEPS, 'tree', file]),
    ]));
    const agent = new Agent({ name: 'cruncher', instructions: 'crunch', model: scriptedModel([callStep('call_ag_1', 'crunch', {}), textStep('never')]), tools: [crunch] });
    const before = pool.stats();
    let ran!: Promise<unknown>;
    const outcome$ = scene.runner.run('s', (turn) => {
      ran = run(agent, 'crunch', { signal: turn.signal, context: { turn } });
      return ran;
    });
    await started(flags);
    const tree = await treePids(file);
    const report = await scene.runner.stop('s');
    const outcome = await outcome$;

    expect(outcome.status).toBe('cancelled');
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false, hardStopped: { workers: 0, processGroups: 0 } });
    expect(pool.stats()).toMatchObject({ cooperativeStops: before.cooperativeStops + 1, hardStops: before.hardStops, running: 0 });
    expect(tree.filter((pid) => !isGone(pid))).toEqual([]);
    await expect(ran).rejects.toThrow();
    const aborted = (await scene.ledger.entries({ turnId: outcome.turnId })).filter((e) => e.type === 'tool_aborted');
    expect(aborted).toEqual([expect.objectContaining({ callId: 'call_ag_1' })]);
  });

  it("a call that finishes is recorded under the model's id and the agent answers", async () => {
    const sum = turnTool('sum', z.object({ n: z.number() }), ({ n }) => pool.run({ n }, { name: 'sum' }));
    const agent = new Agent({ name: 'summer', instructions: 'sum', model: scriptedModel([callStep('call_ag_2', 'sum', { n: 4 }), textStep('ten')]), tools: [sum] });
    const outcome = await scene.runner.run('s', async (turn) => (await run(agent, 'sum to 4', { signal: turn.signal, context: { turn } })).finalOutput);
    expect(outcome).toMatchObject({ status: 'completed', value: 'ten' });
    const output = (await scene.ledger.entries({ turnId: outcome.turnId })).find((e) => e.type === 'tool_output');
    expect(output).toMatchObject({ callId: 'call_ag_2', success: true, output: { total: 10 } });
  });
});
