/**
 * The LangGraph JS recipe of docs/integrations.md, with the real @langchain/langgraph (its prebuilt
 * ReAct agent) and @langchain/core's FakeStreamingChatModel as the model: the turn's signal goes
 * in the invoke config, the turn itself in `configurable`, and each tool runs through `turn.tool`
 * under the model's tool-call id. A stop mid-tool stops the TurnPool worker loop cooperatively,
 * the exec tree is gone, and `invoke` settles.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { tool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { exec, type Turn } from '../dist/src/index.js';
import { started } from './support/handshake.js';
import { isGone } from './support/leaks.js';
import { integrationScene } from './fixtures/integrations/scene.js';
import { pidFile, SLEEPS, treePids } from './fixtures/integrations/tree.js';

const scene = integrationScene('fullstop-langgraph-');
const { pool } = scene;

describe('LangGraph JS recipe', () => {
  it('a stop mid-tool stops the worker loop cooperatively, the exec tree is gone, invoke settles, and the call is aborted under the model id', async () => {
    const flags = new Int32Array(new SharedArrayBuffer(12));
    const file = pidFile();
    // The recipe's tool: the turn comes from `configurable`, the model's id from `toolCall`.
    const crunch = tool(async (input, config) => {
      const turn: Turn = config.configurable.turn;
      return turn.tool('crunch', input, () => Promise.all([
        pool.run({ flags }, { name: 'crunchUntilStopped' }), // no token: the call's token is ambient
        exec('sh', ['-c', SLEEPS, 'tree', file]),
      ]), { callId: config.toolCall?.id });
    }, { name: 'crunch', description: 'crunch numbers', schema: z.object({}) });
    const llm = new FakeStreamingChatModel({ chunks: [{ content: '', tool_calls: [{ id: 'call_lg_1', name: 'crunch', args: {} }] }] });
    const agent = createReactAgent({ llm, tools: [crunch] });
    const before = pool.stats();
    let invoked!: Promise<unknown>;
    const run = scene.runner.run('s', (turn) => {
      invoked = agent.invoke({ messages: [{ role: 'user', content: 'crunch' }] }, { signal: turn.signal, configurable: { turn } });
      return invoked;
    });
    await started(flags);
    const tree = await treePids(file);
    const report = await scene.runner.stop('s');
    const outcome = await run;

    expect(outcome.status).toBe('cancelled');
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false, hardStopped: { workers: 0, processGroups: 0 } });
    expect(pool.stats()).toMatchObject({ cooperativeStops: before.cooperativeStops + 1, hardStops: before.hardStops, running: 0 });
    expect(tree.filter((pid) => !isGone(pid))).toEqual([]);
    await expect(invoked).rejects.toThrow();
    const aborted = (await scene.ledger.entries({ turnId: outcome.turnId })).filter((e) => e.type === 'tool_aborted');
    expect(aborted).toEqual([expect.objectContaining({ callId: 'call_lg_1' })]);
  });
});
