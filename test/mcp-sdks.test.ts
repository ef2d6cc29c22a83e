/**
 * `mcpTurns(server, { runner })` unchanged with both MCP SDK majors, each with its own McpServer,
 * Client and in-memory transport: every tool call is a turn; the client's cancel stops it
 * (`cancel.client`), its request timeout (`cancel.timeout`), its going away (`cancel.disconnect`);
 * and progress keeps a long call alive under `resetTimeoutOnProgress`, with `turn.say` sent as
 * progress text.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { Ledger, TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { mcpTurns } from '../dist/src/mcp/index.js';
import { SDKS, type McpSdk } from './fixtures/integrations/mcp-sdks.js';

let registry: TurnRegistry;
let runner: TurnRunner;
let dir: string;
let ledger: Ledger;
let closers: Array<() => Promise<unknown>>;

beforeEach(async () => {
  registry = new TurnRegistry();
  dir = mkdtempSync(join(tmpdir(), 'fullstop-mcp-sdks-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, ledger, graceMs: 2000 });
  closers = [];
});

afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  expect(runner.listenerCount('say')).toBe(0);
});

/**
 * An McpServer of `sdk` with two tools through mcpTurns, connected to a Client in memory:
 * - wait: a tool call that runs until its turn is stopped (`started` resolves when it runs);
 * - slow { ms, says }: a tool call of `ms`, saying each of `says` first.
 */
async function connected(sdk: McpSdk, progressIntervalMs?: number) {
  const server = sdk.mcpServer();
  const turns = mcpTurns(server, { runner, ...(progressIntervalMs === undefined ? {} : { progressIntervalMs }) });
  let started!: () => void;
  const running = new Promise<void>((resolve) => { started = resolve; });
  server.registerTool('wait', { description: 'wait until stopped' }, turns.tool(async (_args, turn) => {
    await turn.tool('wait', {}, (token) => new Promise((_, reject) => {
      token.signal.addEventListener('abort', () => reject(token.signal.reason), { once: true });
      started();
    }));
    return { content: [{ type: 'text', text: 'not stopped' }] };
  }));
  server.registerTool('slow', { inputSchema: z.object({ ms: z.number(), says: z.array(z.string()) }) }, turns.tool(async ({ ms, says }: { ms: number; says: string[] }, turn) => {
    for (const text of says) await turn.say(text);
    await turn.tool('sleep', { ms }, () => new Promise((resolve) => setTimeout(resolve, ms)));
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  }));
  const [clientSide, serverSide] = sdk.linkedPair();
  await server.connect(serverSide);
  const client = sdk.client();
  await client.connect(clientSide);
  closers.push(() => client.close());
  return { client, server, turns, running };
}

describe.each(SDKS)('fullstop/mcp with MCP SDK v$major ($version)', (sdk) => {
  it('runs each tool call as a turn of its own session, answering its result', async () => {
    const { client } = await connected(sdk);
    const ended: string[] = [];
    runner.on('turn_completed', ({ sessionId }) => ended.push(sessionId));
    expect(await client.callTool({ name: 'slow', arguments: { ms: 1, says: [] } })).toMatchObject({ content: [{ type: 'text', text: 'slept 1' }] });
    expect(await client.callTool({ name: 'slow', arguments: { ms: 1, says: [] } })).toMatchObject({ content: [{ type: 'text', text: 'slept 1' }] });
    expect(ended).toHaveLength(2);
    expect(ended[0]).not.toBe(ended[1]);
    const [started] = await ledger.entries({ sessionId: ended[0] });
    expect(started).toMatchObject({ type: 'turn_started', input: { ms: 1, says: [] } });
  });

  it("the client's cancel stops the turn with cancel.client", async () => {
    const { client, running } = await connected(sdk);
    const aborted = once(runner, 'turn_aborted');
    const cancel = new AbortController();
    const call = sdk.callTool(client, { name: 'wait' }, { signal: cancel.signal });
    await running;
    cancel.abort('the user pressed stop');
    await expect(call).rejects.toThrow(/the user pressed stop/);
    const [{ report }] = await aborted;
    expect(report).toMatchObject({ reason: 'cancel.client', settledCooperatively: true });
  });

  it("the client's request timeout stops the turn with cancel.timeout", async () => {
    const { client, running } = await connected(sdk);
    const aborted = once(runner, 'turn_aborted');
    const call = sdk.callTool(client, { name: 'wait' }, { timeout: 1500 }); // long enough for the call to start under load
    await running;
    await expect(call).rejects.toThrow(/timed out/i);
    const [{ report, turnId }] = await aborted;
    expect(report).toMatchObject({ reason: 'cancel.timeout', settledCooperatively: true });
    const marker = (await ledger.entries({ turnId })).find((e) => e.type === 'turn_aborted');
    expect(marker).toBeDefined();
  });

  it('the client going away mid-call stops the turn with cancel.disconnect', async () => {
    const { client, running } = await connected(sdk);
    const aborted = once(runner, 'turn_aborted');
    const call = client.callTool({ name: 'wait' });
    call.catch(() => {});
    await running;
    await client.close();
    await expect(call).rejects.toThrow(/closed/i);
    const [{ report }] = await aborted;
    expect(report).toMatchObject({ reason: 'cancel.disconnect', settledCooperatively: true });
  });

  it('a 4 s call under a 1.5 s client timeout with resetTimeoutOnProgress completes: progress every interval, and each say with its text', async () => {
    const { client } = await connected(sdk, 500);
    const progress: Array<{ progress: number; message?: string }> = [];
    const result = await sdk.callTool(client, { name: 'slow', arguments: { ms: 4000, says: ['compiling unit 1'] } }, {
      timeout: 1500, resetTimeoutOnProgress: true, onprogress: (p: any) => progress.push(p),
    });
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'slept 4000' }] });
    expect(progress[0]).toMatchObject({ progress: 1, message: 'compiling unit 1' });
    // One every 500 ms over 4 s: at least a few even on a loaded machine, and strictly increasing.
    expect(progress.length).toBeGreaterThanOrEqual(4);
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
  }, 20_000);

  it('sends no progress once the client cancelled the call, while the turn winds down in its grace', async () => {
    const server = sdk.mcpServer();
    const turns = mcpTurns(server, { runner, progressIntervalMs: 10 });
    let inside!: () => void;
    const running = new Promise<void>((resolve) => { inside = resolve; });
    let cancelled = false;
    // A tool that takes ten of its own 10 ms ticks to wind down after the stop's signal (as a
    // command given SIGTERM takes a while to exit): ten heartbeat periods inside the grace.
    server.registerTool('linger', { description: 'winds down slowly' }, turns.tool(async (_args, turn) => {
      turn.signal.addEventListener('abort', () => { cancelled = true; }, { once: true });
      await turn.tool('linger', {}, (token) => new Promise((_, reject) => {
        token.signal.addEventListener('abort', () => {
          let ticks = 0;
          const tick = setInterval(() => { if (++ticks === 10) { clearInterval(tick); reject(token.signal.reason); } }, 10);
        }, { once: true });
        inside();
      }));
      return { content: [{ type: 'text', text: 'not stopped' }] };
    }));
    const [clientSide, serverSide] = sdk.linkedPair();
    await server.connect(serverSide);
    const afterCancel: unknown[] = [];
    const send = serverSide.send.bind(serverSide);
    serverSide.send = (message: any, options: any) => {
      if (message.method === 'notifications/progress' && cancelled) afterCancel.push(message);
      return send(message, options);
    };
    const client = sdk.client();
    const clientErrors: unknown[] = [];
    client.onerror = (error: unknown) => clientErrors.push(error);
    await client.connect(clientSide);
    closers.push(() => client.close());
    const aborted = once(runner, 'turn_aborted');
    const cancel = new AbortController();
    const call = sdk.callTool(client, { name: 'linger' }, { signal: cancel.signal, onprogress: () => {} });
    call.catch(() => {});
    await running;
    cancel.abort('the user pressed stop');
    const [{ report }] = await aborted;
    expect(report).toMatchObject({ reason: 'cancel.client', settledCooperatively: true });
    expect(clientErrors).toEqual([]);
    expect(afterCancel).toEqual([]);
  });

  it('sends no progress to a request that carried no progressToken', async () => {
    const { client, server } = await connected(sdk, 20);
    const sent: unknown[] = [];
    const transport = (server.server ?? server).transport;
    const send = transport.send.bind(transport);
    transport.send = (message: any, options: any) => {
      if (message.method === 'notifications/progress') sent.push(message);
      return send(message, options);
    };
    await client.callTool({ name: 'slow', arguments: { ms: 200, says: ['hello'] } });
    expect(sent).toEqual([]);
  });
});

describe('mcpTurns progressIntervalMs', () => {
  it('refuses a bad interval, naming it', () => {
    const server = SDKS[0].mcpServer();
    expect(() => mcpTurns(server, { runner, progressIntervalMs: -1 })).toThrow(RangeError);
    expect(() => mcpTurns(server, { runner, progressIntervalMs: 'x' as any })).toThrow(/^options\.progressIntervalMs: /);
  });
});

describe('examples/mcp-v2.ts (compiled with the package)', () => {
  it('serves its run tool as a turn to a v2 client, saying first', async () => {
    const { createServer } = await import('../dist/examples/mcp-v2.js');
    const v2 = SDKS.find((s) => s.major === 2)!;
    const server = createServer(runner);
    const [clientSide, serverSide] = v2.linkedPair();
    await server.connect(serverSide);
    const client = v2.client();
    await client.connect(clientSide);
    closers.push(() => client.close());
    const progress: any[] = [];
    const result = await v2.callTool(client, { name: 'run', arguments: { command: 'sh', args: ['-c', 'echo built'] } }, { onprogress: (p: any) => progress.push(p) });
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'built\n' }], isError: false });
    expect(progress[0]).toMatchObject({ message: 'running sh' });
  });
});
