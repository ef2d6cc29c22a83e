/**
 * `fullstop/ai-sdk` with ai@7 (npm alias `ai-v7`) and @ai-sdk/openai@4 (`@ai-sdk/openai-v4`), which
 * need Node 22+: on Node 20 this file skips (CI runs it on Node 22 and 24). With the real provider
 * against a local OpenAI-compatible server, a stop mid-stream through `turn.signal` takes the SDK's
 * abort path; with ai 7's own mock model, `aiTools` keeps the model's `toolCallId`, a stop mid-tool
 * stops the call, and `toModelMessages` after that stop passes ai 7's own prompt validation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isCancelledError } from '../dist/src/index.js';
import { aiTools, toModelMessages } from '../dist/src/ai-sdk/index.js';
import { started } from './support/handshake.js';
import { integrationScene } from './fixtures/integrations/scene.js';
import { scriptedModel } from './fixtures/integrations/models.mjs';
import { startSseServer } from './fixtures/integrations/openai-sse.mjs';

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const scene = integrationScene('fullstop-ai-sdk-v7-');
const { pool } = scene;

const TITLE = NODE_MAJOR < 22
  ? `fullstop/ai-sdk with ai@7 — skipped: ai 7 needs Node 22+, this is Node ${process.versions.node}`
  : `fullstop/ai-sdk with ai@7 on Node ${process.versions.node}`;

describe.skipIf(NODE_MAJOR < 22)(TITLE, () => {
  let ai7: any;
  let openai4: any;
  let server: Awaited<ReturnType<typeof startSseServer>>;

  beforeAll(async () => {
    ai7 = await import('ai-v7');
    openai4 = (await import('@ai-sdk/openai-v4')).createOpenAI;
    server = await startSseServer({ everyMs: 20, words: 1000 });
  });
  afterAll(() => server?.close());

  it('a stop mid-stream through turn.signal ends the stream with its abort part, calls onAbort, closes the request; the turn is cancelled', async () => {
    const model = openai4({ baseURL: server.baseURL, apiKey: 'test-key' }).chat('test-model');
    const seen = server.requests.length;
    const parts: string[] = [];
    let aborts = 0;
    let firstDelta!: () => void;
    const streaming = new Promise<void>((resolve) => { firstDelta = resolve; });
    const run = scene.runner.run('s', async (turn) => {
      const result = ai7.streamText({ model, prompt: 'talk slowly', abortSignal: turn.signal, onAbort: () => { aborts++; } });
      result.text.catch(() => {});
      for await (const part of result.fullStream) {
        parts.push(part.type);
        if (part.type === 'text-delta') firstDelta();
      }
    });
    await streaming;
    const report = await scene.runner.stop('s');
    const outcome = await run;
    expect(outcome.status).toBe('cancelled');
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect(parts).toContain('text-delta');
    expect(parts.at(-1)).toBe('abort');
    expect(aborts).toBe(1);
    expect(await server.requests[seen].closed).toBe(true);
  });

  it("aiTools runs each tool call under the model's toolCallId, with the call's token's signal as execute's abortSignal", async () => {
    const { model, prompts } = scriptedModel(7, [{ calls: [{ id: 'call_v7', name: 'sum', input: { n: 10 } }] }, { text: 'the sum is 55' }]);
    const seen: any[] = [];
    const sum = ai7.tool({
      inputSchema: z.object({ n: z.number() }),
      execute: async ({ n }: { n: number }, options: any) => {
        seen.push(options);
        return pool.run({ n }, { name: 'sum' });
      },
    });
    const outcome = await scene.runner.run('s', async (turn) => {
      const result = await ai7.generateText({ model, tools: aiTools(turn, { sum }), stopWhen: ai7.stepCountIs(3), prompt: 'sum to 10' });
      return result.text;
    });
    expect(outcome).toMatchObject({ status: 'completed', value: 'the sum is 55' });
    expect(seen[0].toolCallId).toBe('call_v7');
    expect(seen[0].abortSignal.aborted).toBe(false);
    const entries = await scene.ledger.entries({ turnId: outcome.turnId });
    expect(entries.find((e) => e.type === 'tool_call')).toMatchObject({ callId: 'call_v7', name: 'sum', args: { n: 10 } });
    expect(entries.find((e) => e.type === 'tool_output')).toMatchObject({ callId: 'call_v7', success: true, output: { total: 55 } });
    const toolMessage = prompts[1].find((m: any) => m.role === 'tool');
    expect(toolMessage.content[0]).toMatchObject({ toolCallId: 'call_v7', output: { type: 'json', value: { total: 55 } } });
  });

  it("after a stop mid-tool, toModelMessages passes ai 7's own validation and the next request carries every call with its result", async () => {
    const flags = new Int32Array(new SharedArrayBuffer(12));
    const crunch = ai7.tool({ inputSchema: z.object({}), execute: async () => pool.run({ flags }, { name: 'crunchUntilStopped' }) });
    const first = scriptedModel(7, [{ text: 'Crunching. ', calls: [{ id: 'call_crunch', name: 'crunch', input: {} }] }]);
    let signal: AbortSignal | undefined;
    const stopped = scene.runner.run('chat', async (turn) => {
      signal = turn.signal;
      const result = ai7.streamText({ model: first.model, tools: aiTools(turn, { crunch }), abortSignal: turn.signal, prompt: 'crunch' });
      for await (const part of result.fullStream) if (part.type === 'text-delta') await turn.say(part.text);
    }, { input: 'crunch forever' });
    await started(flags);
    await scene.runner.stop('chat');
    expect((await stopped).status).toBe('cancelled');
    expect(isCancelledError(signal!.reason)).toBe(true);

    const messages = toModelMessages(await scene.ledger.entries({ sessionId: 'chat' }));
    expect(z.array(ai7.modelMessageSchema).safeParse(messages).success).toBe(true);
    const next = scriptedModel(7, [{ text: 'fine' }]);
    const result = await ai7.generateText({ model: next.model, messages: [...messages, { role: 'user', content: 'and now?' }] });
    expect(result.text).toBe('fine');
    const prompt = next.prompts[0];
    const called = prompt.filter((m: any) => m.role === 'assistant').flatMap((m: any) => m.content).filter((p: any) => p.type === 'tool-call').map((p: any) => p.toolCallId);
    const answered = prompt.filter((m: any) => m.role === 'tool').flatMap((m: any) => m.content).map((p: any) => p.toolCallId);
    expect(called).toEqual(['call_crunch']);
    expect(answered).toEqual(called);
  });
});
