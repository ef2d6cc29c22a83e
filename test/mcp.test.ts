/**
 * `fullstop/mcp`'s answers and arguments, with the SDK's own Client and McpServer (or low-level
 * Server) over its in-memory transport: a returned result passes through, a ToolError is an
 * isError result and the turn goes on, a FatalToolError is thrown (a JSON-RPC error from the
 * low-level Server; McpServer reports a thrown error as an isError result), a server-side stop
 * answers with the call's aborted text, and each call is a turn of its own session.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { FatalToolError, Ledger, TurnPool, TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { mcpTurns } from '../dist/src/mcp/index.js';
import { registerTools } from './fixtures/integrations/mcp-tools.mjs';

const pool = new TurnPool({ filename: new URL('./fixtures/integrations/tasks.mjs', import.meta.url).href, minThreads: 1, maxThreads: 1 });
let registry: TurnRegistry;
let runner: TurnRunner;
let dir: string;
let ledger: Ledger;
let events: { name: string; payload: any }[];
const clients: Client[] = [];

beforeEach(async () => {
  registry = new TurnRegistry();
  dir = mkdtempSync(join(tmpdir(), 'fullstop-mcp-'));
  ledger = await Ledger.open(join(dir, 'history.jsonl'));
  runner = new TurnRunner({ registry, pool, ledger, graceMs: 2000 });
  events = [];
  for (const name of ['turn_started', 'turn_completed', 'turn_failed', 'turn_aborted']) runner.on(name, (payload) => events.push({ name, payload }));
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  expect(pool.stats()).toMatchObject({ running: 0, queued: 0 });
});

afterAll(() => pool.close());

/** An McpServer with the fixture tools, connected to a Client in memory. */
async function connected() {
  const server = new McpServer({ name: 'fullstop-fixture', version: '1.0.0' });
  const turns = mcpTurns(server, { runner });
  registerTools(server, { turns, pool });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'fullstop-test', version: '1.0.0' });
  await client.connect(clientSide);
  clients.push(client);
  return { client, turns };
}

describe('mcpTurns answers', () => {
  it("passes a returned result through, and records the call's arguments as the turn's input", async () => {
    const { client } = await connected();
    const result = await client.callTool({ name: 'sum', arguments: { n: 4 } });
    expect(result).toEqual({ content: [{ type: 'text', text: expect.stringMatching(/^\{"total":10,"threadId":\d+\}$/) }] });
    expect(events.map((e) => e.name)).toEqual(['turn_started', 'turn_completed']);
    const [started] = await ledger.entries({ turnId: events[0].payload.turnId });
    expect(started).toMatchObject({ type: 'turn_started', input: { n: 4 } });
  });

  it('answers a ToolError with an isError text result, and the turn completes', async () => {
    const { client } = await connected();
    expect(await client.callTool({ name: 'fail', arguments: { kind: 'tool' } }))
      .toEqual({ isError: true, content: [{ type: 'text', text: 'no such file: a.txt' }] });
    expect(events.map((e) => e.name)).toEqual(['turn_started', 'turn_completed']);
  });

  it('throws a FatalToolError: the turn fails; the low-level Server answers a JSON-RPC error, McpServer its own isError result', async () => {
    const { client } = await connected();
    expect(await client.callTool({ name: 'fail', arguments: { kind: 'fatal' } }))
      .toEqual({ isError: true, content: [{ type: 'text', text: 'disk on fire' }] });
    expect(events.map((e) => e.name)).toEqual(['turn_started', 'turn_failed']);

    const low = new Server({ name: 'fullstop-low', version: '1.0.0' }, { capabilities: { tools: {} } });
    const turns = mcpTurns(low, { runner });
    const fatal = turns.tool(async () => { throw new FatalToolError('disk on fire'); });
    low.setRequestHandler(CallToolRequestSchema, (request, extra) => fatal(request.params.arguments, extra));
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await low.connect(serverSide);
    const client2 = new Client({ name: 'fullstop-test', version: '1.0.0' });
    await client2.connect(clientSide);
    clients.push(client2);
    await expect(client2.callTool({ name: 'any', arguments: {} })).rejects.toThrow(/disk on fire/);
  });

  it("answers a server-side stop (stopAll) with the call's aborted text; the worker loop stops cooperatively", async () => {
    const { client, turns } = await connected();
    const before = pool.stats();
    let started!: () => void;
    const running = new Promise<void>((resolve) => { started = resolve; });
    const call = client.callTool({ name: 'crunch' }, undefined, { onprogress: () => started() });
    await running;
    const reports = await turns.stopAll();
    expect(reports).toEqual([expect.objectContaining({ reason: 'cancel.shutdown', settledCooperatively: true })]);
    const answer = await call;
    expect(answer).toEqual({ isError: true, content: [{ type: 'text', text: expect.stringMatching(/^aborted after \d+\.\ds: the server shut down$/) }] });
    // The history has the call aborted too (its text measured from the tool call's own start).
    const aborted = (await ledger.entries({ turnId: reports[0].turnId })).find((e) => e.type === 'tool_aborted');
    expect(aborted).toBeDefined();
    expect(pool.stats().cooperativeStops).toBe(before.cooperativeStops + 1);
    expect(await turns.stopAll('cancel.user')).toEqual([]);
  });

  it('gives every call a session and turn of its own, with a per-instance prefix, although request ids restart per client', async () => {
    const a = await connected();
    const b = await connected();
    for (const { client } of [a, b, a]) await client.callTool({ name: 'sum', arguments: { n: 1 } });
    const started = events.filter((e) => e.name === 'turn_started').map((e) => e.payload);
    expect(new Set(started.map((p) => p.sessionId)).size).toBe(3);
    expect(new Set(started.map((p) => p.turnId)).size).toBe(3);
    const prefix = (id: string) => id.replace(/-\d+(-call)?$/, '');
    expect(prefix(started[0].sessionId)).toBe(prefix(started[2].sessionId));
    expect(prefix(started[0].sessionId)).not.toBe(prefix(started[1].sessionId));
  });
});

describe('mcpTurns before a call starts', () => {
  it('answers a request whose signal is already aborted with the aborted text, starting no turn and not running the handler', async () => {
    let ran = false;
    const cb = mcpTurns(new McpServer({ name: 'x', version: '1.0.0' }), { runner }).tool(async () => { ran = true; return { content: [] }; });
    const extra = { signal: AbortSignal.abort(), requestId: 1, sendNotification: async () => {}, sendRequest: async () => ({}) } as any;
    expect(await cb({}, extra)).toEqual({ isError: true, content: [{ type: 'text', text: 'aborted after 0.1s: the client cancelled its request' }] });
    expect(ran).toBe(false);
    expect(events).toEqual([]);
  });
});

describe('mcpTurns arguments', () => {
  it('refuses a server that is not one, a missing runner and a handler that is not a function, naming each', () => {
    const server = new McpServer({ name: 'x', version: '1.0.0' });
    expect(() => mcpTurns(null as any, { runner })).toThrow(new TypeError('server: expected an MCP server (McpServer or Server), got null'));
    expect(() => mcpTurns(server, {} as any)).toThrow(new TypeError('options.runner: expected a TurnRunner, got undefined'));
    expect(() => mcpTurns(server, undefined as any)).toThrow(/^options\.runner: /);
    expect(() => mcpTurns(server, { runner }).tool('no' as any)).toThrow(new TypeError('handler: expected a function, got "no"'));
  });

  it('refuses a call without the SDK\'s extra, naming it, and starts no turn', async () => {
    const cb = mcpTurns(new McpServer({ name: 'x', version: '1.0.0' }), { runner }).tool(async () => ({ content: [] }));
    await expect(cb({}, {} as any)).rejects.toThrow(/^extra: expected the MCP SDK's request extra/);
    expect(events).toEqual([]);
  });
});
