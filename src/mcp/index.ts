/**
 * `fullstop/mcp`: MCP tool calls (the `@modelcontextprotocol/sdk` 1.x server) as turns of a
 * `TurnRunner`, stopped by the client's cancel and by the transport closing. It does not load
 * the SDK (its types refer to the SDK's): the SDK stays an optional peer.
 */

export { mcpTurns, type McpTurns, type McpTurnHandler, type McpToolExtra, type McpServerLike } from './turns.js';
export type { CallToolResult } from './results.js';
