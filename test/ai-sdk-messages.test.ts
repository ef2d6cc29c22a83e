/**
 * `toModelMessages`: a session's real ledger (turns run through `aiTools` with the AI SDK's mock
 * models, one of them stopped mid-tool) as `ModelMessage[]`, checked against the exact array and
 * against the AI SDK's own prompt validation in ai@6 and ai@5: the request after a stop is accepted.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as ai6 from 'ai';
import * as ai5 from 'ai-v5';
import { INTERRUPTED_TOOL_TEXT, TURN_ABORTED_MARKER, type LedgerEntry } from '../dist/src/index.js';
import { aiTools, toModelMessages } from '../dist/src/ai-sdk/index.js';
import { started } from './support/handshake.js';
import { scriptedModel } from './fixtures/integrations/models.mjs';
import { integrationScene } from './fixtures/integrations/scene.js';

const SESSION = 'chat';
const scene = integrationScene('fullstop-ai-messages-');
const { pool } = scene;

const tools = {
  sum: ai6.tool({ inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => (await pool.run({ n }, { name: 'sum' }) as { total: number }).total }),
  crunch: ai6.tool({
    inputSchema: z.object({ flags: z.any() }),
    execute: async ({ flags }) => pool.run({ flags }, { name: 'crunchUntilStopped' }),
  }),
};

/** Four turns of one session: a completed tool turn, a turn stopped mid-tool, two turns with default call ids. */
async function session(): Promise<LedgerEntry[]> {
  const one = scriptedModel(6, [{ calls: [{ id: 'call_a', name: 'sum', input: { n: 10 } }] }, { text: 'It is 55.' }]);
  await scene.runner.run(SESSION, async (turn) => {
    const result = await ai6.generateText({ model: one.model, tools: aiTools(turn, tools), stopWhen: ai6.stepCountIs(2), prompt: 'sum to 10' });
    await turn.say(result.text);
  }, { input: 'sum to 10' });

  const flags = new Int32Array(new SharedArrayBuffer(12));
  const two = scriptedModel(6, [{ calls: [{ id: 'call_b', name: 'crunch', input: { flags: null } }] }]);
  const crunch = { crunch: ai6.tool({ inputSchema: z.object({}), execute: async () => pool.run({ flags }, { name: 'crunchUntilStopped' }) }) };
  const stopped = scene.runner.run(SESSION, async (turn) => {
    await turn.say('Crunching.');
    return ai6.generateText({ model: two.model, tools: aiTools(turn, crunch), prompt: 'crunch' });
  }, { input: 'crunch forever' });
  await started(flags);
  await scene.runner.stop(SESSION);
  expect((await stopped).status).toBe('cancelled');

  for (const input of [{ note: 'first' }, { note: 'second' }]) {
    await scene.runner.run(SESSION, async (turn) => {
      await turn.tool('note', input, async () => 'noted');
    }, { input });
  }
  return scene.ledger.entries({ sessionId: SESSION });
}

describe('toModelMessages', () => {
  it('turns a session with a stopped turn into the exact message array: every call answered once, the marker after the stopped turn, ids unique', async () => {
    const messages = toModelMessages(await session());
    expect(messages).toEqual([
      { role: 'user', content: 'sum to 10' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'call_a', toolName: 'sum', input: { n: 10 } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_a', toolName: 'sum', output: { type: 'json', value: 55 } }] },
      { role: 'assistant', content: [{ type: 'text', text: 'It is 55.' }] },
      { role: 'user', content: 'crunch forever' },
      { role: 'assistant', content: [{ type: 'text', text: 'Crunching.' }, { type: 'tool-call', toolCallId: 'call_b', toolName: 'crunch', input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_b', toolName: 'crunch', output: { type: 'error-text', value: expect.stringMatching(/^aborted by user after \d+\.\ds$/) } }] },
      { role: 'user', content: TURN_ABORTED_MARKER },
      { role: 'user', content: '{"note":"first"}' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'note', input: { note: 'first' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call-1', toolName: 'note', output: { type: 'text', value: 'noted' } }] },
      { role: 'user', content: '{"note":"second"}' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'call-1-t4', toolName: 'note', input: { note: 'second' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call-1-t4', toolName: 'note', output: { type: 'text', value: 'noted' } }] },
    ]);
  });

  it.each([{ version: 6, sdk: ai6 as any }, { version: 5, sdk: ai5 as any }])(
    "passes ai@$version's own prompt validation after a stop mid-tool, and the model receives every call with its result",
    async ({ version, sdk }) => {
      const messages = toModelMessages(await session());
      expect(z.array(sdk.modelMessageSchema).safeParse(messages).success).toBe(true);
      const next = scriptedModel(version, [{ text: 'fine' }]);
      const result = await sdk.generateText({ model: next.model, messages: [...messages, { role: 'user', content: 'and now?' }] });
      expect(result.text).toBe('fine');
      const prompt = next.prompts[0];
      const called = prompt.filter((m: any) => m.role === 'assistant').flatMap((m: any) => m.content).filter((p: any) => p.type === 'tool-call').map((p: any) => p.toolCallId);
      const answered = prompt.filter((m: any) => m.role === 'tool').flatMap((m: any) => m.content).map((p: any) => p.toolCallId);
      expect(called).toEqual(['call_a', 'call_b', 'call-1', 'call-1-t4']);
      expect(answered).toEqual(called);
      expect(prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'and now?' }] });
    },
  );

  it("ai@6 refuses the same history without the stopped call's result (the check above can fail)", async () => {
    const messages = toModelMessages(await session());
    const withoutAborted = messages.filter((m) => !(m.role === 'tool' && m.content.some((p) => p.toolCallId === 'call_b')));
    const next = scriptedModel(6, [{ text: 'fine' }]);
    await expect(ai6.generateText({ model: next.model, messages: [...withoutAborted, { role: 'user', content: 'and now?' }] }))
      .rejects.toThrow(/call_b/);
  });

  it("inside a turn, the session's entries already end with this turn's input: the next request's messages, as they are", async () => {
    await session();
    const next = scriptedModel(6, [{ text: 'fine' }]);
    const outcome = await scene.runner.run(SESSION, async (turn) => {
      const messages = toModelMessages(await scene.ledger.entries({ sessionId: SESSION }));
      return (await ai6.generateText({ model: next.model, tools: aiTools(turn, tools), messages })).text;
    }, { input: 'and now?' });
    expect(outcome).toMatchObject({ status: 'completed', value: 'fine' });
    const prompt = next.prompts[0];
    expect(prompt.filter((m: any) => m.role === 'user' && m.content[0]?.text === 'and now?')).toHaveLength(1);
    expect(prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'and now?' }] });
  });

  it('answers a call that has neither output nor aborted text (a turn still running) with the interrupted text', async () => {
    let during: LedgerEntry[] = [];
    await scene.runner.run(SESSION, async (turn) => {
      await turn.say('Checking. ');
      await turn.tool('look', { at: 1 }, async () => {
        during = await scene.ledger.entries({ sessionId: SESSION });
        return 'seen';
      });
    }, { input: 'look' });
    expect(toModelMessages(during)).toEqual([
      { role: 'user', content: 'look' },
      { role: 'assistant', content: [{ type: 'text', text: 'Checking. ' }, { type: 'tool-call', toolCallId: 'call-1', toolName: 'look', input: { at: 1 } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call-1', toolName: 'look', output: { type: 'error-text', value: INTERRUPTED_TOOL_TEXT } }] },
    ]);
  });

  it('begins a new step at a say after tool calls, and gives a failed output as error text', async () => {
    await scene.runner.run(SESSION, async (turn) => {
      await turn.tool('a', {}, async () => ({ ok: 1 }));
      await turn.tool('b', {}, async () => { throw new Error('no such file'); }).catch(() => {});
      await turn.say('Half ');
      await turn.say('done.');
      await turn.tool('c', {}, async () => null);
    });
    expect(toModelMessages(await scene.ledger.entries({ sessionId: SESSION }))).toEqual([
      { role: 'assistant', content: [
        { type: 'tool-call', toolCallId: 'call-1', toolName: 'a', input: {} },
        { type: 'tool-call', toolCallId: 'call-2', toolName: 'b', input: {} },
      ] },
      { role: 'tool', content: [
        { type: 'tool-result', toolCallId: 'call-1', toolName: 'a', output: { type: 'json', value: { ok: 1 } } },
        { type: 'tool-result', toolCallId: 'call-2', toolName: 'b', output: { type: 'error-text', value: 'no such file' } },
      ] },
      { role: 'assistant', content: [{ type: 'text', text: 'Half done.' }, { type: 'tool-call', toolCallId: 'call-3', toolName: 'c', input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call-3', toolName: 'c', output: { type: 'json', value: null } }] },
    ]);
  });

  it('gives a tool call recorded without a callId an id of its own, unique, answered by its result, accepted by ai@6', () => {
    const entries = [
      { type: 'turn_started', turnId: 't1', input: 'go' },
      { type: 'tool_call', turnId: 't1', name: 'a', args: {} },
      { type: 'tool_output', turnId: 't1', output: 'done', success: true },
      { type: 'turn_started', turnId: 't2', input: 'again' },
      { type: 'tool_call', turnId: 't2', callId: '', name: 'a', args: {} },
    ] as unknown as LedgerEntry[];
    const messages = toModelMessages(entries);
    const ids = messages.flatMap((m) => (m.role === 'assistant' ? m.content : [])).filter((p) => p.type === 'tool-call').map((p: any) => p.toolCallId);
    expect(ids).toEqual([expect.any(String), expect.any(String)]);
    expect(new Set(ids).size).toBe(2);
    expect(messages[2]).toEqual({ role: 'tool', content: [{ type: 'tool-result', toolCallId: ids[0], toolName: 'a', output: { type: 'text', value: 'done' } }] });
    expect(z.array(ai6.modelMessageSchema).safeParse(messages).success).toBe(true);
  });

  it("gives a cut call's result as its aborted text, then its output before the stop: head and tail within the budget, with the omitted count", () => {
    const lines = Array.from({ length: 2000 }, (_, i) => `compiled unit ${i}`).join('\n');
    const aborted = (partial: unknown) => [
      { type: 'tool_call', turnId: 't', callId: 'c', name: 'make', args: {} },
      { type: 'tool_aborted', turnId: 't', callId: 'c', output: 'aborted by user after 2.3s', partial },
    ] as unknown as LedgerEntry[];
    const valueOf = (messages: any[]) => messages[1].content[0].output.value as string;

    const text = valueOf(toModelMessages(aborted({ output: lines, success: true })));
    expect(text.startsWith('aborted by user after 2.3s\n\nIts output before the stop:\ncompiled unit 0\n')).toBe(true);
    expect(text.endsWith('compiled unit 1999')).toBe(true);
    const omitted = Number(/\n… (\d+) bytes omitted …\n/.exec(text)![1]);
    const kept = text.slice(text.indexOf('stop:\n') + 6).replace(/\n… \d+ bytes omitted …\n/, '');
    expect(Buffer.byteLength(kept) + omitted).toBe(Buffer.byteLength(lines));
    expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(4096);
    expect(Buffer.byteLength(kept)).toBeGreaterThan(4000);

    const small = valueOf(toModelMessages(aborted({ output: lines, success: true }), { partialBudgetBytes: 100 }));
    expect(Buffer.byteLength(small.slice(small.indexOf('stop:\n') + 6).replace(/\n… \d+ bytes omitted …\n/, ''))).toBeLessThanOrEqual(100);
    // A multi-byte character at the cut is never split.
    const wide = valueOf(toModelMessages(aborted({ output: 'é'.repeat(5000), success: true }), { partialBudgetBytes: 101 }));
    expect(wide).not.toContain('\uFFFD');
    // Short output is given whole; no partial, or an empty one, adds nothing.
    expect(valueOf(toModelMessages(aborted({ output: 'unit 1 ok', success: true })))).toBe('aborted by user after 2.3s\n\nIts output before the stop:\nunit 1 ok');
    expect(valueOf(toModelMessages(aborted(undefined)))).toBe('aborted by user after 2.3s');
    expect(valueOf(toModelMessages(aborted({ output: '', success: true })))).toBe('aborted by user after 2.3s');
    // A partial whose output JSON had none (a call that returned undefined) reads back without it.
    expect(valueOf(toModelMessages(aborted({ success: true })))).toBe('aborted by user after 2.3s');
    // What a call threw once stopped is the stop's echo, not output it produced.
    expect(valueOf(toModelMessages(aborted({ output: 'pool task stopped', success: false })))).toBe('aborted by user after 2.3s');
    expect(() => toModelMessages([], { partialBudgetBytes: -1 })).toThrow(RangeError);
    expect(() => toModelMessages([], { partialBudgetBytes: '4k' as any })).toThrow(/^options\.partialBudgetBytes: /);
  });

  it('records a toolCallId the model repeats in a turn as a call of its own (<id>-2): both run, the history stays valid', async () => {
    const outcome = await scene.runner.run(SESSION, async (turn) => {
      const t = aiTools(turn, { sum: tools.sum });
      const first = await (t.sum.execute as any)({ n: 3 }, { toolCallId: 'call_dup', messages: [] });
      const second = await (t.sum.execute as any)({ n: 4 }, { toolCallId: 'call_dup', messages: [] });
      return [first, second];
    }, { input: 'sum twice' });
    expect(outcome).toMatchObject({ status: 'completed', value: [6, 10] });
    const entries = await scene.ledger.entries({ sessionId: SESSION });
    expect(entries.filter((e) => e.type === 'tool_call').map((e: any) => e.callId)).toEqual(['call_dup', 'call_dup-2']);
    expect(z.array(ai6.modelMessageSchema).safeParse(toModelMessages(entries)).success).toBe(true);
  });

  it('refuses what is not an array of ledger entries, naming it', () => {
    expect(() => toModelMessages(undefined as any)).toThrow(new TypeError('entries: expected an array of ledger entries, got undefined'));
    expect(() => toModelMessages([{ type: 'say' }] as any)).toThrow(/^entries\[0\]: expected a ledger entry/);
    expect(toModelMessages([])).toEqual([]);
  });
});
