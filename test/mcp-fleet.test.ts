/**
 * `mcpTurns(server, { runner, fleet })` across instances, over real HTTP with each MCP SDK major:
 * two instances (a runner, a fleet on the shared Redis under a prefix of its own, an HTTP server
 * serving stateless Streamable HTTP: a fresh McpServer per request) behind an HTTP proxy that
 * alternates upstreams per request and sends each `notifications/cancelled` to the instance that
 * did NOT get the call (round-robin's worst case). The client identifies itself with a header it
 * sets once per connection (`identify`).
 * - The client cancels a long call (AbortController): the cancel lands on the other instance and
 *   the call's turn ends `cancel.client`, its exec child gone (without the fleet: the call ran on).
 * - The client's request timeout: `cancel.timeout`, the same way.
 * - The client closes its transport mid-call (the POST's stream closes): `cancel.disconnect`.
 * After each: no turn running in Redis, every fleet and registry back to zero, no child left.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as ClientTransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport as ServerTransportV1 } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpHandler, McpServer as McpServerV2, WebStandardStreamableHTTPServerTransport as ServerTransportV2 } from '@modelcontextprotocol/server';
import { Client as ClientV2, StreamableHTTPClientTransport as ClientTransportV2 } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { exec, type StopReport } from '../dist/src/index.js';
import { mcpTurns, type McpCaller } from '../dist/src/mcp/index.js';
import { keysUnder, redisReachable, REDIS_PORT } from './fixtures/fleet/support.js';
import { redisScene } from './fixtures/fleet/backends.js';
import { eventually as eventuallyAsync, type Instance } from './fixtures/fleet/scene.js';
import { eventually, isGone, liveDescendants, toolTree } from './support/leaks.js';

const up = await redisReachable();
if (!up) console.warn(`mcp-fleet tests skipped: no Redis at 127.0.0.1:${REDIS_PORT} (start one with: redis-server --port ${REDIS_PORT}; CI always has it)`);

const CLIENT_HEADER = 'x-mcp-client';
/** Tool bodies begun, in this file. */
let bodies = 0;

async function bodyOf(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text;
}

/** A McpServer of SDK `major` whose `sleep { seconds }` tool runs `sleep` as a turn (through the fleet when `useFleet`). */
function buildServer(major: 1 | 2, inst: Instance, useFleet: boolean, identify?: (caller: McpCaller) => string | undefined) {
  const server = major === 1 ? new McpServerV1({ name: 'fleet-fixture', version: '1.0.0' }) : new McpServerV2({ name: 'fleet-fixture', version: '1.0.0' });
  const turns = mcpTurns(server, { runner: inst.runner, ...(useFleet ? { fleet: inst.fleet, ...(identify ? { identify } : {}) } : {}) });
  const schema = major === 1 ? { seconds: z.string() } : z.object({ seconds: z.string() });
  (server as any).registerTool('sleep', { inputSchema: schema }, turns.tool(async ({ seconds }: { seconds: string }, turn) => {
    bodies++;
    const result = await turn.tool('exec', { seconds }, (token) => exec('sleep', [seconds], { token }));
    return { content: [{ type: 'text', text: `exit ${result.exitCode}` }] };
  }));
  return server;
}

/** Hand one HTTP request to `transport` (v1: Node's req/res; v2: fetch-style, its Response's body piped out). */
async function handle(major: 1 | 2, transport: any, req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
  if (major === 1) {
    await transport.handleRequest(req, res, text === '' ? undefined : JSON.parse(text));
    return;
  }
  await respond((request) => transport.handleRequest(request), req, res, text);
}

/** Node's request to a fetch-style handler, its Response's body piped out; the Request's signal aborts when the response closes. */
async function respond(fetchHandler: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
  const abort = new AbortController();
  res.on('close', () => abort.abort());
  const response = await fetchHandler(new Request(`http://127.0.0.1${req.url}`, {
    method: req.method, headers, ...(req.method === 'POST' ? { body: text } : {}), signal: abort.signal,
  }));
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body === null) { res.end(); return; }
  const reader = response.body.getReader();
  abort.signal.addEventListener('abort', () => { void reader.cancel().catch(() => {}); }, { once: true });
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) res.write(r.value);
    res.end();
  } catch {
    res.destroy();
  }
}

/** A server and a stateless transport for one request, both closed with its response (the SDK's stateless pattern). */
async function stateless(major: 1 | 2, server: any, req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
  const transport = major === 1 ? new ServerTransportV1({ sessionIdGenerator: undefined }) : new ServerTransportV2({ sessionIdGenerator: undefined });
  res.on('close', () => { void transport.close(); void server.close(); });
  await server.connect(transport);
  await handle(major, transport, req, res, text);
}

/** One instance's MCP endpoint, stateless (SDK `major`): a fresh server per request. */
function statelessHandler(major: 1 | 2, inst: Instance, useFleet: boolean) {
  const identify = (caller: McpCaller) => caller.headers.get(CLIENT_HEADER) ?? undefined;
  return async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') { res.writeHead(405).end(); return; }
    await stateless(major, buildServer(major, inst, useFleet, identify), req, res, await bodyOf(req));
  };
}

/**
 * One instance's MCP endpoint, stateful: a server and transport per MCP session it started; a
 * request for a session it does not hold (a cancel the balancer sent here) is served stateless,
 * where the default identity reads its `mcp-session-id` header. `close` closes every session.
 */
function statefulHandler(major: 1 | 2, inst: Instance) {
  const sessions = new Map<string, { transport: any; server: any }>();
  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    const text = req.method === 'POST' ? await bodyOf(req) : '';
    const id = req.headers['mcp-session-id'];
    const held = typeof id === 'string' ? sessions.get(id) : undefined;
    if (held !== undefined) return handle(major, held.transport, req, res, text);
    if (typeof id === 'string') {
      if (req.method !== 'POST') { res.writeHead(404).end(); return; }
      return stateless(major, buildServer(major, inst, true), req, res, text);
    }
    const server = buildServer(major, inst, true);
    const options = { sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sid: string) => { sessions.set(sid, { transport, server }); } };
    const transport: any = major === 1 ? new ServerTransportV1(options) : new ServerTransportV2(options);
    await server.connect(transport);
    await handle(major, transport, req, res, text);
  };
  const close = async () => {
    for (const { transport, server } of sessions.values()) { await transport.close(); await server.close(); }
    sessions.clear();
  };
  return { handler, close };
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): Promise<Server> {
  const server = createServer((req, res) => { void handler(req, res); });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

const portOf = (s: Server) => (s.address() as AddressInfo).port;

/**
 * An HTTP proxy over `upstreams`: each request to the next upstream in turn, except a
 * `notifications/cancelled`, sent to an upstream other than the one that got the last
 * `tools/call` (`cancelTo: 'same'`: to that one, where a fresh stateless server gets it). `hold.calls`: a `tools/call` waits for it. `sticky`: every other request to the first upstream (a balancer keeping an MCP
 * session on its instance). A client closing its connection closes the upstream request.
 */
async function roundRobinProxy(upstreams: Server[], sticky = false, cancelTo: 'other' | 'same' = 'other') {
  let next = 0;
  let lastCall = -1;
  const routes: Array<{ method: string; upstream: number }> = [];
  /** While set, a `tools/call` waits for it before it is forwarded (a slow path to its instance). */
  const hold: { calls: Promise<void> | undefined } = { calls: undefined };
  const server = await listen(async (req, res) => {
    const body = await bodyOf(req);
    let method = req.method ?? '';
    try { method = JSON.parse(body).method ?? method; } catch { /* not JSON-RPC */ }
    let upstream = sticky ? 0 : next++ % upstreams.length;
    if (method === 'notifications/cancelled') upstream = cancelTo === 'same' ? lastCall : (lastCall + 1) % upstreams.length;
    if (method === 'tools/call') lastCall = upstream;
    routes.push({ method, upstream });
    if (method === 'tools/call' && hold.calls !== undefined) await hold.calls;
    const up = httpRequest({ host: '127.0.0.1', port: portOf(upstreams[upstream]), method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    up.end(body);
  });
  return { server, routes, hold };
}

/** A client of SDK `major` through `url`, naming itself with `id` (a fresh one per connection by default). */
function client(major: 1 | 2, url: URL, id: string = randomUUID()) {
  const requestInit = { headers: { [CLIENT_HEADER]: id } };
  if (major === 1) {
    const c = new ClientV1({ name: 'fleet-test', version: '1.0.0' });
    return { connect: () => c.connect(new ClientTransportV1(url, { requestInit })), close: () => c.close(),
      call: (args: object, options: object) => c.callTool({ name: 'sleep', arguments: args }, undefined, options) };
  }
  const c = new ClientV2({ name: 'fleet-test', version: '1.0.0' });
  return { connect: () => c.connect(new ClientTransportV2(url, { requestInit })), close: () => c.close(),
    call: (args: object, options: object) => c.callTool({ name: 'sleep', arguments: args }, options) };
}

/** What a test opens, closed after it in reverse order; then no child of the test may be left. */
function closedAfterEach(): Array<() => Promise<unknown> | void> {
  const closers: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    // exec's reaper outlives the child by a moment (test/support/leaks.ts).
    await eventually(() => liveDescendants().length === 0, 10_000, 'no child left').catch(() => {});
    expect(liveDescendants()).toEqual([]);
  });
  return closers;
}

describe.skipIf(!up)('fullstop/mcp with a fleet, two instances behind a round-robin proxy', () => {
  const current = redisScene();
  const closers = closedAfterEach();

  /** Two instances, their HTTP servers, the proxy; `aborted` collects every turn_aborted report with its instance. */
  async function fleetOfTwo(major: 1 | 2, mode: 'stateless' | 'stateful' | 'createMcpHandler' = 'stateless', cancelTo: 'other' | 'same' = 'other') {
    const instances = [await current.scene.instance('A', {}, { graceMs: 2000 }), await current.scene.instance('B', {}, { graceMs: 2000 })];
    const servers = await Promise.all(instances.map((inst) => {
      if (mode === 'stateless') return listen(statelessHandler(major, inst, true));
      if (mode === 'createMcpHandler') {
        // The v2 SDK's own serving entry: a server from the factory per request (2025-era clients: stateless).
        const handler = createMcpHandler(() => buildServer(2, inst, true, (caller) => caller.headers.get(CLIENT_HEADER) ?? undefined));
        closers.push(() => handler.close());
        return listen(async (req, res) => respond(handler.fetch, req, res, req.method === 'POST' ? await bodyOf(req) : ''));
      }
      const { handler, close } = statefulHandler(major, inst);
      closers.push(close);
      return listen(handler);
    }));
    const proxy = await roundRobinProxy(servers, mode === 'stateful', cancelTo);
    for (const s of [...servers, proxy.server]) closers.push(() => { s.closeAllConnections(); s.close(); });
    const aborted: Array<{ instance: number; report: StopReport }> = [];
    instances.forEach((inst, instance) => inst.runner.on('turn_aborted', ({ report }: { report: StopReport }) => aborted.push({ instance, report })));
    const url = new URL(`http://127.0.0.1:${portOf(proxy.server)}/mcp`);
    return { instances, proxy, aborted, url };
  }

  /** Starts a 30 s `sleep` call; resolves with its promise, its exec child's pid, and the instance it runs on. */
  async function longCall(c: ReturnType<typeof client>, proxy: { routes: Array<{ method: string; upstream: number }> }, options: object) {
    const call = c.call({ seconds: '30' }, options);
    call.catch(() => {});
    await eventually(() => toolTree().length === 1, 10_000, 'the call to start its exec child');
    const [pid] = toolTree();
    const instance = proxy.routes.filter((r) => r.method === 'tools/call').at(-1)!.upstream;
    return { call, pid, instance };
  }

  /** No fleet turn of the scene's prefix is still running in Redis. */
  /** The call's turn was stopped on `instance` with `reason`: its command is gone, its turn ended there and in Redis. */
  async function stoppedOn(instances: Instance[], aborted: Array<{ instance: number; report: StopReport }>, instance: number, reason: string, pid: number) {
    await eventually(() => aborted.length === 1, 10_000, 'the call\'s turn to be stopped');
    expect(aborted[0]).toMatchObject({ instance, report: { reason } });
    await eventually(() => isGone(pid), 10_000, 'the exec child to be gone');
    await eventually(() => instances[instance]!.runner.registry.currentToken(aborted[0]!.report.sessionId) === undefined, 10_000, 'the turn to end');
    await noRunningTurnsInRedis(instances, aborted[0]!.report.sessionId);
  }

  async function noRunningTurnsInRedis(instances: Instance[], sessionId: string) {
    expect(await instances[0].fleet.turn(sessionId)).toMatchObject({ sessionId, status: expect.stringMatching(/^(cancelled|completed|failed)$/) });
    const keys = await keysUnder(current.raw, current.scene.prefix);
    const statuses: string[] = [];
    for (const key of keys.filter((k) => k.endsWith(':turns'))) {
      if (await current.raw.type(key) !== 'hash') continue;
      for (const value of Object.values(await current.raw.hGetAll(key))) {
        try { const status = JSON.parse(value)?.status; if (typeof status === 'string') statuses.push(status); } catch { /* not a record */ }
      }
    }
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.filter((st) => st === 'running' || st === 'cancelling')).toEqual([]);
  }

  for (const major of [1, 2] as const) {
    describe(`MCP SDK v${major} over Streamable HTTP`, () => {
      it("the client's cancel lands on the other instance and stops the call there (cancel.client): its exec child is gone", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major);
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        const cancel = new AbortController();
        const { call, pid, instance } = await longCall(c, proxy, { signal: cancel.signal });
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await eventually(() => aborted.length === 1, 10_000, 'the call\'s turn to be stopped');
        expect(aborted[0]).toMatchObject({ instance, report: { reason: 'cancel.client' } });
        const cancelled = proxy.routes.filter((r) => r.method === 'notifications/cancelled');
        expect(cancelled).toHaveLength(1);
        expect(cancelled[0].upstream).not.toBe(instance);
        await eventually(() => isGone(pid), 10_000, 'the exec child to be gone');
        await eventually(() => instances[instance].runner.registry.currentToken(aborted[0].report.sessionId) === undefined, 10_000, 'the turn to end');
        await noRunningTurnsInRedis(instances, aborted[0].report.sessionId);
      });

      it("the client's cancel that lands on the call's own instance, on a fresh stateless server there, stops the call (cancel.client)", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major, 'stateless', 'same');
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        const cancel = new AbortController();
        const { call, pid, instance } = await longCall(c, proxy, { signal: cancel.signal });
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await stoppedOn(instances, aborted, instance, 'cancel.client', pid);
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([instance]);
      });

      it("the client's request timeout lands on the other instance and stops the call there (cancel.timeout)", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major);
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        const { call, pid, instance } = await longCall(c, proxy, { timeout: 3000 });
        await expect(call).rejects.toThrow(/timed out/i);
        await stoppedOn(instances, aborted, instance, 'cancel.timeout', pid);
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1 - instance]);
      });

      it("stateful: the client's cancel, sent by the balancer to an instance that does not hold the MCP session, stops the call (cancel.client) by its mcp-session-id", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major, 'stateful');
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        const cancel = new AbortController();
        const { call, pid, instance } = await longCall(c, proxy, { signal: cancel.signal });
        expect(instance).toBe(0);
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await eventually(() => aborted.length === 1, 10_000, 'the call\'s turn to be stopped');
        expect(aborted[0]).toMatchObject({ instance: 0, report: { reason: 'cancel.client' } });
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1]);
        await eventually(() => isGone(pid), 10_000, 'the exec child to be gone');
        await eventually(() => instances[0].runner.registry.currentToken(aborted[0].report.sessionId) === undefined, 10_000, 'the turn to end');
        await noRunningTurnsInRedis(instances, aborted[0].report.sessionId);
      });

      it('a cancel that overtakes its call (the call still on its way to its instance) is kept: the call starts cancelled and its body never runs', async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major);
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        let release!: () => void;
        proxy.hold.calls = new Promise((resolve) => { release = resolve; });
        const before = bodies;
        const cancel = new AbortController();
        const call = c.call({ seconds: '30' }, { signal: cancel.signal });
        call.catch(() => {});
        await eventually(() => proxy.routes.some((r) => r.method === 'tools/call'), 10_000, 'the call to reach the proxy');
        const instance = proxy.routes.find((r) => r.method === 'tools/call')!.upstream;
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await eventually(() => proxy.routes.some((r) => r.method === 'notifications/cancelled'), 10_000, 'the cancel to pass the proxy');
        // The instance answers the cancel's POST before its stop reaches Redis: wait for the stop to be kept there.
        await eventuallyAsync(async () => (await keysUnder(current.raw, current.scene.prefix)).some((k) => k.endsWith(':pending')), 10_000, 'the stop to be kept (pending)');
        release();
        await eventually(() => aborted.length === 1, 10_000, 'the call\'s turn to be stopped');
        expect(aborted[0]).toMatchObject({ instance, report: { reason: 'cancel.client' } });
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1 - instance]);
        expect(bodies).toBe(before);
        await eventually(() => instances[instance].runner.registry.currentToken(aborted[0].report.sessionId) === undefined, 10_000, 'the turn to end');
        await noRunningTurnsInRedis(instances, aborted[0].report.sessionId);
      });

      it.runIf(major === 2)("the SDK's createMcpHandler: the client's cancel lands on the other instance and stops the call there (cancel.client)", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major, 'createMcpHandler');
        const c = client(major, url);
        await c.connect();
        closers.push(() => c.close());
        const cancel = new AbortController();
        const { call, pid, instance } = await longCall(c, proxy, { signal: cancel.signal });
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await stoppedOn(instances, aborted, instance, 'cancel.client', pid);
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1 - instance]);
      });

      it.runIf(major === 2)("the SDK's createMcpHandler: the client closing its transport mid-call stops the call (cancel.disconnect)", async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major, 'createMcpHandler');
        const c = client(major, url);
        await c.connect();
        const { pid, instance } = await longCall(c, proxy, {});
        await c.close();
        await stoppedOn(instances, aborted, instance, 'cancel.disconnect', pid);
      });

      it('a client that comes back under an identity already used (its request ids repeat): its calls still run, and its cancel still stops a running one', async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major);
        const first = client(major, url, 'reused-id');
        await first.connect();
        expect(await first.call({ seconds: '0' }, {})).toMatchObject({ content: [{ type: 'text', text: 'exit 0' }] });
        expect(await first.call({ seconds: '0' }, {})).toMatchObject({ content: [{ type: 'text', text: 'exit 0' }] });
        await first.close();
        const second = client(major, url, 'reused-id');
        await second.connect();
        closers.push(() => second.close());
        // Its first call has the request id of the first client's first call: used fleet-wide.
        expect(await second.call({ seconds: '0' }, {})).toMatchObject({ content: [{ type: 'text', text: 'exit 0' }] });
        const cancel = new AbortController();
        const { call, pid, instance } = await longCall(second, proxy, { signal: cancel.signal });
        cancel.abort('the user pressed stop');
        await expect(call).rejects.toThrow(/the user pressed stop/);
        await stoppedOn(instances, aborted, instance, 'cancel.client', pid);
        expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1 - instance]);
      });

      it('the client closing its transport mid-call (the POST stream closes) stops the call (cancel.disconnect)', async () => {
        const { instances, proxy, aborted, url } = await fleetOfTwo(major);
        const c = client(major, url);
        await c.connect();
        const { pid, instance } = await longCall(c, proxy, {});
        await c.close();
        await stoppedOn(instances, aborted, instance, 'cancel.disconnect', pid);
      });
    });
  }
});

describe.skipIf(!up)('examples/mcp-v2.ts handleStateless (compiled with the package), two instances behind a round-robin proxy', () => {
  const current = redisScene();
  const closers = closedAfterEach();

  it("a v2 client's cancel that lands on the other instance stops its run call there (cancel.client), and its command is gone", async () => {
    const { handleStateless, CLIENT_HEADER: header } = await import('../dist/examples/mcp-v2.js');
    const instances = [await current.scene.instance('A', {}, { graceMs: 2000 }), await current.scene.instance('B', {}, { graceMs: 2000 })];
    const servers = await Promise.all(instances.map((inst) => listen(async (req, res) => {
      if (req.method !== 'POST') { res.writeHead(405).end(); return; }
      await respond((request) => handleStateless(request, inst.runner, inst.fleet), req, res, await bodyOf(req));
    })));
    const proxy = await roundRobinProxy(servers);
    for (const s of [...servers, proxy.server]) closers.push(() => { s.closeAllConnections(); s.close(); });
    const aborted: Array<{ instance: number; report: StopReport }> = [];
    instances.forEach((inst, instance) => inst.runner.on('turn_aborted', ({ report }: { report: StopReport }) => aborted.push({ instance, report })));
    const c = new ClientV2({ name: 'fleet-test', version: '1.0.0' });
    await c.connect(new ClientTransportV2(new URL(`http://127.0.0.1:${portOf(proxy.server)}/mcp`), { requestInit: { headers: { [header]: randomUUID() } } }));
    closers.push(() => c.close());
    const cancel = new AbortController();
    const call = c.callTool({ name: 'run', arguments: { command: 'sleep', args: ['30'] } }, { signal: cancel.signal });
    call.catch(() => {});
    await eventually(() => toolTree().length === 1, 10_000, 'the call to start its command');
    const [pid] = toolTree();
    const instance = proxy.routes.filter((r) => r.method === 'tools/call').at(-1)!.upstream;
    cancel.abort('the user pressed stop');
    await expect(call).rejects.toThrow(/the user pressed stop/);
    await eventually(() => aborted.length === 1, 10_000, 'the call\'s turn to be stopped');
    expect(aborted[0]).toMatchObject({ instance, report: { reason: 'cancel.client' } });
    expect(proxy.routes.filter((r) => r.method === 'notifications/cancelled').map((r) => r.upstream)).toEqual([1 - instance]);
    await eventually(() => isGone(pid), 10_000, 'the command to be gone');
    await eventually(() => instances[instance].runner.registry.currentToken(aborted[0].report.sessionId) === undefined, 10_000, 'the turn to end');
    expect(await instances[1 - instance].fleet.turn(aborted[0].report.sessionId)).toMatchObject({ status: 'cancelled' });
  });
});

describe('mcpTurns fleet options', () => {
  it('refuses a fleet or an identify that is not one, naming the option', async () => {
    const { TurnRegistry, TurnRunner } = await import('../dist/src/index.js');
    const runner = new TurnRunner({ registry: new TurnRegistry() });
    const server = new McpServerV2({ name: 'fleet-fixture', version: '1.0.0' });
    expect(() => mcpTurns(server, { runner, fleet: {} as any })).toThrow(/^options\.fleet: expected a Fleet/);
    expect(() => mcpTurns(server, { runner, fleet: null as any })).toThrow(/^options\.fleet: expected a Fleet/);
    expect(() => mcpTurns(server, { runner, identify: 'x-client' as any })).toThrow(TypeError);
    expect(() => mcpTurns(server, { runner, identify: 'x-client' as any })).toThrow(/options\.identify/);
  });
});
