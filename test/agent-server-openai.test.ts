/**
 * The agent server with `OPENAI_BASE_URL` set: it talks to an OpenAI-compatible endpoint through
 * the official SDK. The endpoint here is a local fake that streams chat-completion chunks, so the
 * test sees what the server sends and when it hangs up: a stop must close the model's HTTP stream
 * at once (`signal: turn.signal`), not when the model is done.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ServerProcess } from './e2e/server-process.js';

/** Polls an async condition (liveness bound only). */
async function eventually(condition: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await condition());) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
  }
}

interface SeenRequest { body: any; closedEarly: Promise<boolean> }
const seen: SeenRequest[] = [];
let fake: Server;
let server: ServerProcess;

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/** Streams `Hi there.` and ends, or (prompt "forever") a token every 20 ms until the client hangs up. */
function reply(body: any, res: ServerResponse): void {
  const last = body.messages.at(-1);
  if (last.role === 'user' && last.content.includes('slow crunch')) {
    res.write(chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_slow', type: 'function', function: { name: 'crunch', arguments: '{"phases": 500}' } }] }, 'tool_calls'));
    res.end('data: [DONE]\n\n');
  } else if (last.role === 'user' && last.content.includes('use crunch')) {
    res.write(chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'crunch', arguments: '{"phas' } }] }));
    res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: 'es": 2}' } }] }, 'tool_calls'));
    res.end('data: [DONE]\n\n');
  } else if (last.role === 'user' && last.content.includes('forever')) {
    const timer = setInterval(() => res.write(chunk({ content: 'more ' })), 20);
    res.on('close', () => clearInterval(timer));
  } else {
    for (const word of ['Hi ', 'there', '.']) res.write(chunk({ content: word }));
    res.write(chunk({}, 'stop'));
    res.end('data: [DONE]\n\n');
  }
}

beforeAll(async () => {
  fake = createServer(async (req, res) => {
    let text = '';
    for await (const part of req) text += part;
    const body = JSON.parse(text);
    const closedEarly = new Promise<boolean>((resolve) => res.on('close', () => resolve(!res.writableFinished)));
    seen.push({ body, closedEarly });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    reply(body, res);
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  const { port } = fake.address() as AddressInfo;
  server = await ServerProcess.start([], { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: 'test-key', MODEL: 'fake-model' });
});
afterAll(async () => {
  if (server !== undefined) expect((await server.terminate()).code).toBe(0);
  fake.closeAllConnections();
  await new Promise((resolve) => fake.close(resolve));
});

describe('agent server with an OpenAI-compatible endpoint', () => {
  it('streams the model reply and completes', async () => {
    expect(server.output).toMatch(/model openai\.chat:fake-model/);
    const events = await server.events('oa-1');
    try {
      const { body } = await server.post('/api/sessions/oa-1/turns', { prompt: 'say hi' });
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === body.turnId);
      expect(events.events.filter((e) => e.type === 'say').map((e) => e.data.text)).toEqual(['Hi ', 'there', '.']);
      const request = seen.at(-1)!.body;
      expect(request).toMatchObject({ model: 'fake-model', stream: true });
      expect(request.tools.map((t: any) => t.function.name)).toEqual(['crunch', 'shell', 'ask']);
    } finally {
      events.close();
    }
  });

  it("runs the tool the model calls and sends its result back in the model's format", async () => {
    const events = await server.events('oa-2');
    try {
      const { body } = await server.post('/api/sessions/oa-2/turns', { prompt: 'use crunch' });
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === body.turnId, 30_000);
      expect((await events.next('tool_output')).data).toMatchObject({ callId: 'call_abc', success: true, output: { phases: 2 } });
      const followUp = seen.at(-1)!.body.messages;
      expect(followUp.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_abc', function: { name: 'crunch', arguments: '{"phases":2}' } }] });
      expect(followUp.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_abc' });
      expect(JSON.parse(followUp.at(-1).content)).toMatchObject({ phases: 2, hashes: 60_000 });
    } finally {
      events.close();
    }
  });

  it('a stop closes the model stream at once and the turn is cancelled', async () => {
    const events = await server.events('oa-3');
    try {
      const { body } = await server.post('/api/sessions/oa-3/turns', { prompt: 'talk forever' });
      await events.next('say', (e) => e.data.turnId === body.turnId);
      const request = seen.at(-1)!;
      const stop = await server.post('/api/sessions/oa-3/stop', {});
      expect(stop.body).toMatchObject({ outcome: 'stopped', report: { settledCooperatively: true } });
      await events.next('turn_aborted', (e) => e.data.turnId === body.turnId, 1000);
      // The endpoint saw the connection closed before it finished its reply.
      expect(await request.closedEarly).toBe(true);
      const requests = seen.length;
      const health = (await server.get('/healthz')).body;
      expect(health.stats.registry).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
      expect(seen.length).toBe(requests); // the SDK did not retry a stopped request
    } finally {
      events.close();
    }
  });

  it("the turn after a stop sends the whole history: the cut call answered with its aborted text, the stop said as a user message", async () => {
    const events = await server.events('oa-4');
    try {
      const { body } = await server.post('/api/sessions/oa-4/turns', { prompt: 'a slow crunch please' });
      await events.next('tool_call', (e) => e.data.turnId === body.turnId);
      await eventually(async () => (await server.get('/healthz')).body.stats.pool.running === 1, 'the crunch on a worker');
      expect((await server.post('/api/sessions/oa-4/stop', {})).body.outcome).toBe('stopped');
      await events.next('turn_aborted', (e) => e.data.turnId === body.turnId, 1000);
      const next = await server.post('/api/sessions/oa-4/turns', { prompt: 'say hi' });
      await events.next('status', (e) => e.data.status === 'completed' && e.data.turnId === next.body.turnId);
      const messages = seen.at(-1)!.body.messages;
      expect(messages.map((m: any) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user', 'user']);
      expect(messages[1]).toEqual({ role: 'user', content: 'a slow crunch please' });
      expect(messages[2]).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_slow', function: { name: 'crunch', arguments: '{"phases":500}' } }] });
      expect(messages[3]).toMatchObject({ role: 'tool', tool_call_id: 'call_slow' });
      expect(messages[3].content).toMatch(/aborted by user after \d+\.\ds/);
      expect(messages[4].content).toMatch(/^The user stopped this turn on purpose/);
      expect(messages[5]).toEqual({ role: 'user', content: 'say hi' });
    } finally {
      events.close();
    }
  });
});
