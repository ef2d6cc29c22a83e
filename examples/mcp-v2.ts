/**
 * An MCP server on the v2 SDK (`@modelcontextprotocol/server`) whose tool calls are fullstop
 * turns: `node dist/examples/mcp-v2.js` serves it over stdio. A client's cancel stops the call's
 * command tree (`cancel.client`), its request timeout (`cancel.timeout`), its going away
 * (`cancel.disconnect`); a long command sends progress every 5 s and a line for each `say`, so a
 * client using `resetTimeoutOnProgress` keeps waiting. The same code serves a v1 `McpServer`
 * (`@modelcontextprotocol/sdk/server/mcp.js`): only the imports differ.
 *
 * `handleStateless(request, runner, fleet)` serves it over stateless Streamable HTTP, fetch-style
 * (Hono's `c.req.raw`, `Bun.serve`, `Deno.serve`), on any number of instances sharing a fleet: a
 * client's cancel stops its call whichever instance it lands on, the client identified by the
 * `x-mcp-client` header it sets once per connection.
 */
import { McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { exec, TurnRegistry, TurnRunner } from '../src/index.js';
import { mcpTurns, type McpFleet, type McpIdentify } from '../src/mcp/index.js';

/** The header a client sets once per connection (`requestInit.headers`), naming it in stateless HTTP. */
export const CLIENT_HEADER = 'x-mcp-client';

/**
 * A v2 McpServer with one tool, `run { command, args }`, each call a turn of `runner` (through
 * `options.fleet` when given, found by its cancel through `options.identify`).
 */
export function createServer(runner: TurnRunner, options: { fleet?: McpFleet; identify?: McpIdentify } = {}): McpServer {
  const server = new McpServer({ name: 'fullstop-example', version: '1.0.0' });
  const turns = mcpTurns(server, { runner, progressIntervalMs: 5000, ...options });
  server.registerTool('run', {
    description: 'Run a command; a cancel stops its whole process tree',
    inputSchema: z.object({ command: z.string(), args: z.array(z.string()) }),
  }, turns.tool(async ({ command, args }, turn) => {
    await turn.say(`running ${command}`);
    const result = await turn.tool('exec', { command, args }, (token) => exec(command, args, { token }));
    return { content: [{ type: 'text', text: result.stdout }], isError: result.exitCode !== 0 };
  }));
  return server;
}

/**
 * One request of stateless Streamable HTTP: a fresh server and transport, closed when the request
 * aborts (the client went away: its call stops with `cancel.disconnect`). With `fleet`, a cancel
 * that lands on any instance stops its call.
 */
export async function handleStateless(request: Request, runner: TurnRunner, fleet?: McpFleet): Promise<Response> {
  const server = createServer(runner, fleet === undefined ? {} : {
    fleet,
    // In production, combine it with the authenticated user (docs/integrations.md).
    identify: (caller) => caller.headers.get(CLIENT_HEADER) ?? undefined,
  });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  request.signal.addEventListener('abort', () => { void transport.close(); void server.close(); }, { once: true });
  await server.connect(transport);
  return transport.handleRequest(request);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const runner = new TurnRunner({ registry: new TurnRegistry() });
  const server = createServer(runner);
  await server.connect(new StdioServerTransport());
  // The SDK's stdio transport does not close by itself when the client goes away.
  process.stdin.on('end', () => { void server.close(); });
}
