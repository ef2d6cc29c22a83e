/**
 * `fullstop/mcp` over the MCP SDK's real transports, with the SDK's own Client:
 * - stdio (a server process, mcp-stdio-server.mjs): the client's cancel stops the call's turn with
 *   `cancel.client`, and the client going away (stdin ends, the host closes the transport) with
 *   `cancel.disconnect`; the server process then exits by itself.
 * - Streamable HTTP, stateless (in this process, as the SDK's stateless example): the client
 *   closing its transport mid-call stops the turn with `cancel.disconnect`.
 * Each time the CPU-bound TurnPool task stops cooperatively and the next call runs on the same worker.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { TurnPool, TurnRegistry, TurnRunner } from '../dist/src/index.js';
import { mcpTurns } from '../dist/src/mcp/index.js';
import { registerTools } from './fixtures/integrations/mcp-tools.mjs';
import { eventually, isGone, liveDescendants } from './support/leaks.js';

const fixtures = new URL('./fixtures/integrations/', import.meta.url);

afterEach(() => {
  expect(liveDescendants()).toEqual([]);
});

/** A client connected to a fresh stdio server process; `exit` resolves with its `EXIT` report. */
async function stdioServer() {
  const transport = new StdioClientTransport({
    command: process.execPath, args: [new URL('mcp-stdio-server.mjs', fixtures).pathname], stderr: 'pipe',
  });
  let stderr = '';
  const exit = new Promise<any>((resolve) => {
    transport.stderr!.on('data', (chunk) => {
      stderr += chunk;
      const line = /^EXIT (.*)$/m.exec(stderr);
      if (line !== null) resolve(JSON.parse(line[1]));
    });
  });
  const client = new Client({ name: 'fullstop-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, pid: transport.pid!, exit, stderr: () => stderr };
}

/** Call `crunch` and run `onStarted(threadId)` once its pool task has started (its progress). */
function crunch(client: Client, onStarted: (threadId: number) => void, signal?: AbortSignal) {
  return client.callTool({ name: 'crunch' }, undefined, {
    signal, onprogress: (p) => onStarted(Number(p.message)),
  });
}

describe('fullstop/mcp over stdio', () => {
  it("the client's cancel stops the turn (cancel.client): the worker loop stops cooperatively and the next call runs on the same worker", async () => {
    const { client, pid, exit } = await stdioServer();
    const cancel = new AbortController();
    let worker = 0;
    const call = crunch(client, (threadId) => { worker = threadId; cancel.abort('the user pressed stop'); }, cancel.signal);
    await expect(call).rejects.toThrow(/the user pressed stop/);
    const sum = await client.callTool({ name: 'sum', arguments: { n: 4 } });
    expect(JSON.parse((sum.content as any)[0].text)).toEqual({ total: 10, threadId: worker });
    await client.close();
    const report = await exit;
    expect(report.reports).toEqual([expect.objectContaining({ reason: 'cancel.client', settledCooperatively: true, hardStopped: { workers: 0, processGroups: 0, questions: 0 } })]);
    expect(report.pool).toMatchObject({ cooperativeStops: 1, hardStops: 0, running: 0 });
    expect(report.registry).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    await eventually(() => isGone(pid), 5000, 'the server process to exit');
  });

  it('the client going away mid-call stops the turn (cancel.disconnect) once the host closes the transport, and the server exits by itself', async () => {
    const { client, pid, exit } = await stdioServer();
    let closing!: Promise<void>;
    const call = crunch(client, () => { closing = client.close(); });
    await expect(call).rejects.toThrow(/closed/i);
    await closing;
    const report = await exit;
    expect(report.reports).toEqual([expect.objectContaining({ reason: 'cancel.disconnect', settledCooperatively: true })]);
    expect(report.pool).toMatchObject({ cooperativeStops: 1, hardStops: 0, running: 0 });
    expect(report.registry).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    await eventually(() => isGone(pid), 5000, 'the server process to exit');
  });
});

async function bodyOf(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text === '' ? undefined : JSON.parse(text);
}

describe('fullstop/mcp over Streamable HTTP (stateless)', () => {
  it('the client closing its transport mid-call stops the turn (cancel.disconnect): the worker loop stops cooperatively and the next call runs on the same worker', async () => {
    const pool = new TurnPool({ filename: new URL('tasks.mjs', fixtures).href, minThreads: 1, maxThreads: 1 });
    const registry = new TurnRegistry();
    const runner = new TurnRunner({ registry, pool, graceMs: 2000 });
    // The SDK's stateless pattern: a server and a transport per request, closed with the response.
    const http = createServer(async (req, res) => {
      if (req.method !== 'POST') { res.writeHead(405).end(); return; }
      const server = new McpServer({ name: 'fullstop-fixture', version: '1.0.0' });
      registerTools(server, { turns: mcpTurns(server, { runner }), pool });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => { void transport.close(); void server.close(); });
      await server.connect(transport);
      await transport.handleRequest(req, res, await bodyOf(req));
    });
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    const url = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`);
    try {
      const first = new Client({ name: 'fullstop-test', version: '1.0.0' });
      await first.connect(new StreamableHTTPClientTransport(url));
      const aborted = once(runner, 'turn_aborted');
      let worker = 0;
      const call = crunch(first, (threadId) => { worker = threadId; void first.close(); });
      await expect(call).rejects.toThrow();
      const [{ report }] = await aborted;
      expect(report).toMatchObject({ reason: 'cancel.disconnect', settledCooperatively: true, hardStopped: { workers: 0 } });
      expect(pool.stats()).toMatchObject({ cooperativeStops: 1, hardStops: 0 });

      const second = new Client({ name: 'fullstop-test', version: '1.0.0' });
      await second.connect(new StreamableHTTPClientTransport(url));
      const sum = await second.callTool({ name: 'sum', arguments: { n: 4 } });
      expect(JSON.parse((sum.content as any)[0].text)).toEqual({ total: 10, threadId: worker });
      await second.close();
      expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    } finally {
      http.closeAllConnections();
      http.close();
      await pool.close();
    }
  });
});
