/**
 * A stop mid-stream takes the AI SDK's own abort path. `streamText({ abortSignal: turn.signal })`
 * with the real OpenAI provider (ai@6 + @ai-sdk/openai@3, ai@5 + @ai-sdk/openai@2) against a local
 * OpenAI-compatible server that streams slowly: `runner.stop` mid-stream ends the stream with its
 * `abort` part, calls `onAbort` (not `onError`), `result.text` settles (rejects at once), the HTTP request is closed,
 * and the turn is `cancelled` with its body settled in the grace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ai6 from 'ai';
import * as ai5 from 'ai-v5';
import { createOpenAI as openai3 } from '@ai-sdk/openai';
import { createOpenAI as openai2 } from '@ai-sdk/openai-v2';
import { TurnRegistry, TurnRunner, isCancelledError } from '../dist/src/index.js';
import { startSseServer } from './fixtures/integrations/openai-sse.mjs';

let server: Awaited<ReturnType<typeof startSseServer>>;

beforeAll(async () => { server = await startSseServer({ everyMs: 20, words: 1000 }); });
afterAll(() => server.close());

/** `promise` settled as { ok, value | error }, or a rejection after `ms` (a liveness bound). */
function settledWithin<T>(promise: Promise<T>, ms: number, what: string): Promise<{ ok: boolean; value?: T; error?: unknown }> {
  let timer!: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms); });
  return Promise.race([promise.then((value) => ({ ok: true, value }), (error) => ({ ok: false, error })), late]).finally(() => clearTimeout(timer));
}

// How result.text settles after an abort is the SDK's own: ai@6 rejects with the signal's reason
// (the stop itself), ai@5 with its NoOutputGeneratedError, which carries no cause.
describe.each([
  { version: 6, sdk: ai6 as any, provider: openai3 as any, textError: (e: any) => isCancelledError(e) },
  { version: 5, sdk: ai5 as any, provider: openai2 as any, textError: (e: any) => e?.name === 'AI_NoOutputGeneratedError' },
])('streamText of ai@$version with abortSignal: turn.signal', ({ sdk, provider, textError }) => {
  it("a stop mid-stream ends the stream with its abort part, calls onAbort, settles result.text and closes the request", async () => {
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, graceMs: 2000 });
    const model = provider({ baseURL: server.baseURL, apiKey: 'test-key' }).chat('test-model');
    const seen = server.requests.length;
    const parts: string[] = [];
    const calls = { abort: 0, error: [] as unknown[] };
    let firstDelta!: () => void;
    const streaming = new Promise<void>((resolve) => { firstDelta = resolve; });
    let text!: Promise<string>;
    const run = runner.run('s', async (turn) => {
      const result = sdk.streamText({
        model, prompt: 'talk slowly', abortSignal: turn.signal,
        onAbort: () => { calls.abort++; },
        onError: ({ error }: { error: unknown }) => { calls.error.push(error); },
      });
      text = result.text;
      text.catch(() => {}); // read below; never an unhandled rejection meanwhile
      for await (const part of result.fullStream) {
        parts.push(part.type);
        if (part.type === 'text-delta') firstDelta();
      }
    });
    await streaming;
    const report = await runner.stop('s');
    const outcome = await run;

    expect(outcome.status).toBe('cancelled');
    expect(parts).toContain('text-delta');
    expect(parts.at(-1)).toBe('abort');
    expect(calls).toEqual({ abort: 1, error: [] });
    const settled = await settledWithin(text, 5000, 'result.text');
    expect(settled.ok).toBe(false);
    expect(textError(settled.error)).toBe(true);
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect(server.requests).toHaveLength(seen + 1);
    expect(await settledWithin(server.requests[seen].closed, 5000, 'the request to close')).toEqual({ ok: true, value: true });
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});
