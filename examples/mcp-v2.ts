/**
 * An MCP server on the v2 SDK (`@modelcontextprotocol/server`) whose tool calls are fullstop
 * turns: `node dist/examples/mcp-v2.js` serves it over stdio. A client's cancel stops the call's
 * command tree (`cancel.client`), its request timeout (`cancel.timeout`), its going away
 * (`cancel.disconnect`); a long command sends progress every 5 s and a line for each `say`, so a
 * client using `resetTimeoutOnProgress` keeps waiting. The same code serves a v1 `McpServer`
 * (`@modelcontextprotocol/sdk/server/mcp.js`): only the imports differ.
 */
import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { exec, TurnRegistry, TurnRunner } from '../src/index.js';
import { mcpTurns } from '../src/mcp/index.js';

/** A v2 McpServer with one tool, `run { command, args }`, each call a turn of `runner`. */
export function createServer(runner: TurnRunner): McpServer {
  const server = new McpServer({ name: 'fullstop-example', version: '1.0.0' });
  const turns = mcpTurns(server, { runner, progressIntervalMs: 5000 });
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

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const runner = new TurnRunner({ registry: new TurnRegistry() });
  const server = createServer(runner);
  await server.connect(new StdioServerTransport());
  // The SDK's stdio transport does not close by itself when the client goes away.
  process.stdin.on('end', () => { void server.close(); });
}
